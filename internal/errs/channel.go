package errs

import "errors"

// The sentinels of channels (baton.Channel).
var (
	ChannelFull   = errors.New("baton: channel full")
	ChannelEmpty  = errors.New("baton: channel empty")
	ChannelClosed = errors.New("baton: channel closed")
	ChannelBusy   = errors.New("baton: channel end held by another handle")
)

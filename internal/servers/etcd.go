package servers

import (
	"fmt"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// startEtcd runs an etcd member in this process.
func startEtcd() (string, func(), error) {
	dir, err := dataDir("etcd")
	if err != nil {
		return "", nil, err
	}
	cp, err1 := freePort()
	pp, err2 := freePort()
	if err1 != nil || err2 != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("no free port")
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "fatal" // start-up failures come back as errors; closing logs noise at "error"
	clientURL := url.URL{Scheme: "http", Host: loopback(cp)}
	peerURL := url.URL{Scheme: "http", Host: loopback(pp)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.Name + "=" + peerURL.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop := func() { e.Close(); os.RemoveAll(dir) }
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		stop()
		return "", nil, fmt.Errorf("embedded etcd did not start")
	}
	return "etcd://" + clientURL.Host, stop, nil
}

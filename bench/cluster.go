//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/etcdlock"
	"github.com/batonlock/baton/cluster/redislock"
	"github.com/batonlock/baton/cluster/redlock"
	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
)

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// redisServer is one redis-server process started for the run.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	dir  string // removed at stop when set
}

func startRedis(ctx context.Context, pin pinning) (*redisServer, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not on PATH (apt-get install redis-server): %w", err)
	}
	var lastErr error
	for range 3 { // a port taken between freePort and bind is tried again
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		cmd := pin.command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes",
			"--loglevel", "warning")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		s := &redisServer{addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd}
		c := redis.NewClient(&redis.Options{Addr: s.addr})
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if lastErr = c.Ping(ctx).Err(); lastErr == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		c.Close()
		if lastErr == nil {
			return s, nil
		}
		s.stop()
	}
	return nil, fmt.Errorf("redis-server did not answer: %w", lastErr)
}

func (s *redisServer) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// etcdServer is an embedded single-member etcd on loopback ports: in this
// process (e), or in a worker process (w) that serves it.
type etcdServer struct {
	e    *embed.Etcd
	w    *worker
	dir  string
	addr string
}

// startEtcd starts the etcd section's server in a worker process of its
// own, as redis-server and postgres are: in this process its allocations
// would count in the Go heap of the memory tables, and its goroutines and
// collections would share the clients' scheduler.
func startEtcd() (*etcdServer, error) {
	w, err := startWorker(workerArgs{Role: "etcd"})
	if err != nil {
		return nil, err
	}
	line, err := w.out.ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "etcd ")
	if err != nil || !ok {
		w.kill()
		return nil, fmt.Errorf("etcd worker: said %q (%v)", line, err)
	}
	return &etcdServer{w: w, addr: addr}, nil
}

// etcdWorker serves an embedded etcd until stdin closes.
func etcdWorker(in io.Reader) error {
	s, err := embedEtcd()
	if err != nil {
		return err
	}
	defer s.stop()
	fmt.Println("etcd " + s.addr)
	_, _ = io.Copy(io.Discard, in)
	return nil
}

func embedEtcd() (*etcdServer, error) {
	dir, err := os.MkdirTemp("", "baton-bench-etcd-")
	if err != nil {
		return nil, err
	}
	cp, err := freePort()
	if err != nil {
		return nil, err
	}
	pp, err := freePort()
	if err != nil {
		return nil, err
	}
	cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", cp))
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", pp))
	cfg := embed.NewConfig()
	cfg.Name = "bench"
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{"/dev/null"}
	// Every subject talks to this one server, so the disk is out of the
	// comparison: fsync on a shared machine only adds noise.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		os.RemoveAll(dir)
		return nil, errors.New("embedded etcd did not become ready")
	}
	return &etcdServer{e: e, dir: dir, addr: cu.Host}, nil
}

func (s *etcdServer) stop() {
	if s.w != nil {
		s.w.in.Close()
		_ = s.w.cmd.Wait()
		return
	}
	s.e.Close()
	os.RemoveAll(s.dir)
}

func randToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// rawRedis is the floor of a Redis lock: SET NX PX to take it, polling
// while taken, and a compare-and-delete script to give it back.
type rawRedis struct {
	c    *redis.Client
	key  string
	val  string
	poll time.Duration
}

var casDelete = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// lock polls until SET NX succeeds. A failed request is tried again, as
// redsync's retry loop does, until errors have lasted errRetryFor.
func (r *rawRedis) lock(ctx context.Context) error {
	var failingSince time.Time
	for {
		ok, err := r.c.SetNX(ctx, r.key, r.val, lockTTL).Result()
		switch {
		case ok:
			return nil
		case err == nil:
			failingSince = time.Time{}
		case ctx.Err() != nil:
			return err
		case failingSince.IsZero():
			failingSince = time.Now()
		case time.Since(failingSince) > errRetryFor:
			return fmt.Errorf("raw redis: failing for %s: %w", errRetryFor, err)
		}
		select {
		case <-time.After(r.poll):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *rawRedis) unlock(ctx context.Context) error {
	n, err := casDelete.Run(ctx, r.c, []string{r.key}, r.val).Int()
	if err == nil && n != 1 {
		err = errors.New("raw redis: lock not held")
	}
	return err
}
func (r *rawRedis) close() error { return nil }

type bsmH struct {
	c    *bsm.Client
	key  string
	poll time.Duration
	l    *bsm.Lock // the current hold; one goroutine uses a handle
}

func (b *bsmH) lock(ctx context.Context) error {
	for {
		l, err := b.c.Obtain(ctx, b.key, lockTTL, &bsm.Options{RetryStrategy: bsm.LinearBackoff(b.poll)})
		if err == nil {
			b.l = l
			return nil
		}
		// Obtain gives up after one TTL without a deadline; keep waiting
		// as the other subjects do.
		if ctx.Err() != nil || !(errors.Is(err, bsm.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
	}
}

func (b *bsmH) unlock(ctx context.Context) error { return b.l.Release(ctx) }
func (b *bsmH) close() error                     { return nil }

type redsyncH struct{ m *redsync.Mutex }

func (r redsyncH) lock(ctx context.Context) error {
	for {
		err := r.m.LockContext(ctx)
		var taken *redsync.ErrTaken
		if err == nil || ctx.Err() != nil || !(errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken)) {
			return err
		}
	}
}

func (r redsyncH) unlock(ctx context.Context) error {
	ok, err := r.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock failed")
	}
	return err
}
func (r redsyncH) close() error { return nil }

type etcdH struct {
	s *concurrency.Session
	m *concurrency.Mutex
}

func (e etcdH) lock(ctx context.Context) error   { return e.m.Lock(ctx) }
func (e etcdH) unlock(ctx context.Context) error { return e.m.Unlock(ctx) }
func (e etcdH) close() error                     { return e.s.Close() }

// lockTTL is the lease of every Redis peer lock: long enough never to
// expire during a measurement.
const lockTTL = 10 * time.Second

// clusterEnv holds the servers and clients of the networked subjects.
type clusterEnv struct {
	redis    []*redisServer
	clients  []*redis.Client
	etcd     *etcdServer
	etcdC    *clientv3.Client
	closers  []func() error
	subjects []*subject
}

func openClusterEnv(ctx context.Context, poll time.Duration, withRedis, withEtcd bool, pin pinning, logf func(string, ...any)) (*clusterEnv, error) {
	ce := &clusterEnv{}
	if withRedis {
		for range 3 {
			s, err := startRedis(ctx, pin)
			if err != nil {
				ce.close()
				return nil, err
			}
			ce.redis = append(ce.redis, s)
			ce.clients = append(ce.clients, redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: 64}))
		}
		logf("redis-server on %s, %s, %s", ce.redis[0].addr, ce.redis[1].addr, ce.redis[2].addr)
		c0 := ce.clients[0]
		rb, err := redislock.New(c0)
		if err != nil {
			ce.close()
			return nil, err
		}
		ce.closers = append(ce.closers, rb.Close)
		var ucs []redis.UniversalClient
		for _, c := range ce.clients {
			ucs = append(ucs, c)
		}
		rl, err := redlock.New(ucs)
		if err != nil {
			ce.close()
			return nil, err
		}
		ce.closers = append(ce.closers, rl.Close)
		bc := bsm.New(c0)
		rs1 := redsync.New(redsyncgoredis.NewPool(c0))
		var pools []redsyncredis.Pool
		for _, c := range ce.clients {
			pools = append(pools, redsyncgoredis.NewPool(c))
		}
		rs3 := redsync.New(pools...)
		rsOpts := []redsync.Option{redsync.WithExpiry(lockTTL), redsync.WithTries(1 << 30), redsync.WithRetryDelay(poll)}
		ce.subjects = append(ce.subjects,
			&subject{name: "raw SET NX + EVAL", id: "rawredis", kind: "redis",
				mutex: func(ctx context.Context, key string) (mutexH, error) {
					return &rawRedis{c: c0, key: "rawredis:" + key, val: randToken(), poll: poll}, nil
				}},
			&subject{name: "raw fair BLPOP line", id: "rawline", kind: "redis",
				mutex: func(ctx context.Context, key string) (mutexH, error) { return openRawLine(ctx, c0, key) }},
			&subject{name: "bsm/redislock", id: "bsm", kind: "redis",
				mutex: func(ctx context.Context, key string) (mutexH, error) {
					return &bsmH{c: bc, key: "bsm:" + key, poll: poll}, nil
				}},
			&subject{name: "redsync", id: "redsync", kind: "redis",
				mutex: func(ctx context.Context, key string) (mutexH, error) {
					return redsyncH{rs1.NewMutex("redsync:"+key, rsOpts...)}, nil
				}},
			withClients(batonSubject("baton redis", "bredis", "redis", false, rb, true, true, true),
				func() (baton.Backend, error) { return redislock.New(c0) }),
			&subject{name: "raw Redlock 3 nodes", id: "rawredlock", kind: "redis",
				mutex: func(ctx context.Context, key string) (mutexH, error) {
					return &rawRedlock{cs: ce.clients, key: "rawredlock:" + key, poll: poll}, nil
				}},
			&subject{name: "redsync 3 nodes", id: "redsync3", kind: "redis",
				mutex: func(ctx context.Context, key string) (mutexH, error) {
					return redsyncH{rs3.NewMutex("redsync3:"+key, rsOpts...)}, nil
				}},
			withClients(batonSubject("baton redlock 3 nodes", "bredlock", "redis", false, rl, true, false, false),
				func() (baton.Backend, error) { return redlock.New(ucs) }),
		)
	}
	if withEtcd {
		s, err := startEtcd()
		if err != nil {
			ce.close()
			return nil, err
		}
		ce.etcd = s
		logf("embedded etcd on %s", s.addr)
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.addr}, DialTimeout: 5 * time.Second})
		if err != nil {
			ce.close()
			return nil, err
		}
		ce.etcdC = c
		eb, err := etcdlock.New(c)
		if err != nil {
			ce.close()
			return nil, err
		}
		ce.closers = append(ce.closers, eb.Close)
		ce.subjects = append(ce.subjects,
			&subject{name: "etcd concurrency", id: "etcdconc", kind: "etcd",
				mutex: func(ctx context.Context, key string) (mutexH, error) {
					// One session per handle: handles sharing a session
					// would not exclude each other.
					s, err := concurrency.NewSession(c)
					if err != nil {
						return nil, err
					}
					return etcdH{s: s, m: concurrency.NewMutex(s, "/etcdconc/"+key)}, nil
				}},
			withClients(batonSubject("baton etcd", "betcd", "etcd", false, eb, true, true, true),
				func() (baton.Backend, error) { return etcdlock.New(c) }),
		)
	}
	return ce, nil
}

func (ce *clusterEnv) close() {
	for i := len(ce.closers) - 1; i >= 0; i-- {
		_ = ce.closers[i]()
	}
	ce.closers = nil
	if ce.etcdC != nil {
		ce.etcdC.Close()
	}
	if ce.etcd != nil {
		ce.etcd.stop()
	}
	for _, c := range ce.clients {
		c.Close()
	}
	for _, s := range ce.redis {
		s.stop()
	}
}

// serverCPU is the CPU time the redis-server processes have used so far,
// added to the client's so that CPU per acquisition covers both ends.
func (ce *clusterEnv) serverCPU() time.Duration {
	var d time.Duration
	for _, s := range ce.redis {
		d += procCPU(s.cmd.Process.Pid)
	}
	return d
}

package servers

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// zkJar is where Debian's zookeeper package puts the server.
const zkJar = "/usr/share/java/zookeeper.jar"

// startZooKeeper runs a standalone ZooKeeper server.
func startZooKeeper() (string, func(), error) {
	if _, err := os.Stat(zkJar); err != nil {
		return "", nil, fmt.Errorf("zookeeper is not installed: %w", err)
	}
	dir, err := dataDir("zookeeper")
	if err != nil {
		return "", nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	cfg := filepath.Join(dir, "zoo.cfg")
	conf := strings.Join([]string{"tickTime=200", "dataDir=" + dir, "clientPort=" + strconv.Itoa(port),
		"clientPortAddress=127.0.0.1", "admin.enableServer=false", "4lw.commands.whitelist=ruok,srvr", "forceSync=no"}, "\n")
	if err := os.WriteFile(cfg, []byte(conf+"\n"), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	p, err := run(&proc{dir: dir}, "java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.log.dir="+dir, "-cp", zkJar+":/usr/share/java/*",
		"org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	if err != nil {
		return "", nil, err
	}
	addr := loopback(port)
	if err := waitFor(60*time.Second, func() bool { return serving(addr) }); err != nil {
		p.stop()
		return "", nil, err
	}
	return "zk://" + addr + "/baton-examples", p.stop, nil
}

// serving asks the server whether it serves clients: "srvr" names its
// mode only then ("ruok" answers as soon as the process runs, and a
// client could connect and wait a minute for a session).
func serving(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	b, _ := io.ReadAll(c)
	return strings.Contains(string(b), "Mode: ")
}

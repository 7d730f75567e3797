package servers

import (
	"fmt"
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
		"clientPortAddress=127.0.0.1", "admin.enableServer=false", "4lw.commands.whitelist=ruok", "forceSync=no"}, "\n")
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
	if err := waitFor(60*time.Second, func() bool { return ruok(addr) }); err != nil {
		p.stop()
		return "", nil, err
	}
	return "zk://" + addr + "/baton-examples", p.stop, nil
}

// ruok asks the server whether it serves.
func ruok(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("ruok")); err != nil {
		return false
	}
	b := make([]byte, 4)
	n, _ := c.Read(b)
	return string(b[:n]) == "imok"
}

package report

import (
	"strings"
	"testing"
)

func TestWriteChangeLog(t *testing.T) {
	var b strings.Builder
	WriteChangeLog(&b, []ChangeLine{
		{Verb: "applied", FindingID: "net.rps-needed", Command: "echo f > /sys/class/net/eth0/queues/rx-0/rps_cpus"},
		{Verb: "left as found", FindingID: "net.gro-off", Command: "ethtool -K eth0 gro on", Note: "changed since"},
	})
	want := "applied [net.rps-needed]: echo f > /sys/class/net/eth0/queues/rx-0/rps_cpus\n" +
		"left as found [net.gro-off]: ethtool -K eth0 gro on (changed since)\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

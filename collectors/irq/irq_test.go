package irq

import (
	"slices"
	"strings"
	"testing"
)

func TestInterruptsReferenceHost(t *testing.T) {
	in, err := NewFS("testdata/ixgbe-ens1f0").Interrupts()
	if err != nil {
		t.Fatal(err)
	}
	if len(in.CPUs) != 20 {
		t.Fatalf("%d CPUs", len(in.CPUs))
	}
	l, ok := in.Line(68)
	if !ok || l.Name != "ens1f0-TxRx-3" || l.Chip != "IR-PCI-MSI" || l.HWIRQ != "15728643-edge" {
		t.Errorf("irq 68 = %+v", l)
	}
	if v, ok := in.CountOn(68, 3); !ok || v == 0 || l.Total() != v {
		t.Errorf("irq 68 on CPU3 = %d %v, total %d", v, ok, l.Total())
	}
	var loc, errRow Line
	for _, l := range in.Lines {
		switch l.ID {
		case "LOC":
			loc = l
		case "ERR":
			errRow = l
		}
	}
	if loc.IRQ != -1 || len(loc.Counts) != 20 || loc.Name != "Local timer interrupts" {
		t.Errorf("LOC = %+v", loc)
	}
	if len(errRow.Counts) != 1 {
		t.Errorf("ERR = %+v (one system-wide count)", errRow)
	}
}

func TestInterruptsLiveVM(t *testing.T) {
	in, err := NewFS("testdata/vm2cpu").Interrupts()
	if err != nil {
		t.Fatal(err)
	}
	l, ok := in.Line(38)
	if !ok || l.Name != "virtio2-input.0" || l.Chip != "PCI-MSIX-0000:00:03.0" || l.HWIRQ != "1-edge" {
		t.Errorf("irq 38 = %+v", l)
	}
}

func TestSplitDescription(t *testing.T) {
	tests := []struct{ in, chip, hwirq, name string }{
		{"IO-APIC 2-edge timer", "IO-APIC", "2-edge", "timer"},
		{"GICv3 27 Level arch_timer", "GICv3", "27 Level", "arch_timer"},
		{"IO-APIC 1-edge i8042, ttyS0", "IO-APIC", "1-edge", "i8042, ttyS0"},
		{"IR-IO-APIC 9-fasteoi acpi", "IR-IO-APIC", "9-fasteoi", "acpi"},
		{"dummy chained", "dummy", "", "chained"},
		{"", "", "", ""},
	}
	for _, tt := range tests {
		c, h, n := splitDescription(strings.Fields(tt.in))
		if c != tt.chip || h != tt.hwirq || n != tt.name {
			t.Errorf("%q → %q %q %q", tt.in, c, h, n)
		}
	}
	if got := (Line{Name: "i8042, ttyS0"}).Actions(); !slices.Equal(got, []string{"i8042", "ttyS0"}) {
		t.Errorf("actions = %v", got)
	}
}

func TestInterruptsRejectsMalformed(t *testing.T) {
	for _, in := range []string{
		"",
		"CPU0 X\n",
		"\n",
		"  CPU0 CPU1\n 5: 1 IO-APIC 5-edge x\n",
		"  CPU0\n 5 1 IO-APIC 5-edge x\n",
	} {
		if _, err := parseInterrupts(strings.NewReader(in)); err == nil {
			t.Errorf("accepted %q", in)
		}
	}
}

func TestInterruptsSub(t *testing.T) {
	prev, _ := parseInterrupts(strings.NewReader("  CPU0 CPU1\n 5: 10 20 IO-APIC 5-edge x\n"))
	cur, _ := parseInterrupts(strings.NewReader("  CPU0 CPU1\n 5: 15 90 IO-APIC 5-edge x\n 6: 7 0 IO-APIC 6-edge y\n"))
	d := cur.Sub(prev)
	if v, _ := d.CountOn(5, 1); v != 70 {
		t.Errorf("irq5 cpu1 delta = %d", v)
	}
	if v, _ := d.CountOn(6, 0); v != 7 {
		t.Errorf("new irq6 delta = %d", v)
	}
	if v, _ := prev.CountOn(5, 1); v != 20 {
		t.Error("Sub modified its input")
	}
}

func TestQueueIRQsTable(t *testing.T) {
	const text = `            CPU0       CPU1
  27:    1   0  PCI-MSI 81920-edge      ena-mgmnt@pci:0000:00:05.0
  28:    5   0  PCI-MSI 81921-edge      eth0-Tx-Rx-0
  29:    0   5  PCI-MSI 81922-edge      eth0-Tx-Rx-1
  98:    1   0  IR-PCI-MSI 49807361-edge      mlx5_comp0@pci:0000:5e:00.0
  99:    1   0  IR-PCI-MSI 49807362-edge      mlx5_comp1@pci:0000:5e:00.0
 100:    1   0  IR-PCI-MSI 49807363-edge      mlx5_comp0@pci:0000:5e:00.1
 120:    1   0  IR-PCI-MSI 1048577-edge      i40e-eth2-TxRx-7
 121:    1   0  IR-PCI-MSI 1048578-edge      i40e-eth2-TxRx-70
 130:    1   0  IR-PCI-MSI 1048600-edge      eth3-rx-2
 131:    1   0  IR-PCI-MSI 1048601-edge      eth3-tx-2
 140:    1   0  IR-PCI-MSI 1048700-edge      eth4-TxRx-0
 141:    1   0  IR-PCI-MSI 1048701-edge      eth40-TxRx-0
  38:    0  4695  PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
  39: 2886     0  PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0
  40:    0     0  PCI-MSIX-0000:00:03.0   0-edge      virtio2-config
`
	in, err := parseInterrupts(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dev  Device
		want []QueueIRQ
	}{
		{Device{Interface: "eth0", PCIAddress: "0000:00:05.0", MSIIRQs: []int{27, 28, 29}}, []QueueIRQ{
			{27, "ena-mgmnt@pci:0000:00:05.0", Other, -1}, {28, "eth0-Tx-Rx-0", Combined, 0}, {29, "eth0-Tx-Rx-1", Combined, 1}}},
		{Device{Interface: "ens5f0np0", PCIAddress: "0000:5e:00.0"}, []QueueIRQ{
			{98, "mlx5_comp0@pci:0000:5e:00.0", Combined, 0}, {99, "mlx5_comp1@pci:0000:5e:00.0", Combined, 1}}},
		{Device{Interface: "eth2"}, []QueueIRQ{{120, "i40e-eth2-TxRx-7", Combined, 7}, {121, "i40e-eth2-TxRx-70", Combined, 70}}},
		{Device{Interface: "eth3"}, []QueueIRQ{{130, "eth3-rx-2", RX, 2}, {131, "eth3-tx-2", TX, 2}}},
		// eth4 must not pick up eth40's IRQs.
		{Device{Interface: "eth4"}, []QueueIRQ{{140, "eth4-TxRx-0", Combined, 0}}},
		{Device{Interface: "eth9", Virtio: "virtio2", MSIIRQs: []int{38, 39, 40}}, []QueueIRQ{
			{38, "virtio2-input.0", RX, 0}, {39, "virtio2-output.0", TX, 0}, {40, "virtio2-config", Other, -1}}},
		// veth and lo have no IRQs.
		{Device{Interface: "vb"}, nil},
	}
	for _, tt := range tests {
		got := QueueIRQs(in, tt.dev)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.dev.Interface, got, tt.want)
		}
	}
}

func TestAffinityReferenceHost(t *testing.T) {
	fs := NewFS("testdata/ixgbe-ens1f0")
	a, err := fs.Affinity(81) // ens1f0-TxRx-16
	if err != nil {
		t.Fatal(err)
	}
	if a.SMPAffinity.List() != "0-4,10-14" || a.Hint.List() != "16" || !a.HintIgnored() {
		t.Errorf("irq 81 = %+v", a)
	}
	if !a.EffectiveKnown || a.Effective.List() != "11" || a.Node == nil || *a.Node != 0 {
		t.Errorf("irq 81 effective/node = %+v", a)
	}
	link, err := fs.Affinity(85)
	if err != nil || link.EffectiveKnown || !link.HintKnown || !link.Hint.IsEmpty() || link.HintIgnored() {
		t.Errorf("link irq = %+v %v", link, err)
	}
	if _, err := fs.Affinity(999); err == nil {
		t.Error("absent IRQ accepted")
	}
}

func TestIrqbalance(t *testing.T) {
	tests := []struct {
		root       string
		running    bool
		policy     string
		configFile string
		banned     string
	}{
		{"testdata/ixgbe-ens1f0", true, "", "/etc/sysconfig/irqbalance", ""},
		{"testdata/exact", true, "exact", "/etc/sysconfig/irqbalance", ""},
		{"testdata/debian", false, "subset", "/etc/default/irqbalance", "0-1"},
		{"testdata/vm2cpu", false, "", "", ""},
	}
	for _, tt := range tests {
		ib, err := NewFS(tt.root).Irqbalance()
		if err != nil {
			t.Errorf("%s: %v", tt.root, err)
			continue
		}
		if ib.Running != tt.running || ib.HintPolicy != tt.policy || ib.ConfigFile != tt.configFile || ib.BannedCPUs != tt.banned {
			t.Errorf("%s: %+v", tt.root, ib)
		}
	}
	for args, want := range map[string]string{"-h exact": "exact", "-hsubset": "subset", "--hintpolicy=ignore": "ignore", "--hintpolicy exact": "exact", "--foreground": "", "-h": ""} {
		if got := hintPolicy(strings.Fields(args)); got != want {
			t.Errorf("hintPolicy(%q) = %q, want %q", args, got, want)
		}
	}
}

func TestIrqbalanceVersion(t *testing.T) {
	status := `Package: irqbalance-ui
Status: install ok installed
Version: 9.9

Package: irqbalance
Status: deinstall ok config-files
Version: 1.5.0-3

Package: irqbalance
Status: install ok installed
Priority: optional
Version: 1:1.9.3-2+b1
Description: Daemon to balance interrupts for SMP systems
`
	if v := dpkgVersion(strings.NewReader(status), "irqbalance"); v != "1.9.3" {
		t.Errorf("dpkg version = %q, want 1.9.3", v)
	}
	if v := dpkgVersion(strings.NewReader("Package: irqbalance\nStatus: deinstall ok config-files\nVersion: 1.5.0-3\n"), "irqbalance"); v != "" {
		t.Errorf("removed package has version %q", v)
	}
	if v := parseVersionOutput("irqbalance version 1.9.4\n"); v != "1.9.4" {
		t.Errorf("--version = %q", v)
	}
	for v, want := range map[string][2]bool{"1.1.0": {false, true}, "1.2.0": {true, true}, "1.10.1": {true, true}, "0.56": {false, true}, "": {false, false}, "x": {false, false}} {
		got, ok := Irqbalance{Version: v}.VersionAtLeast(1, 2)
		if got != want[0] || ok != want[1] {
			t.Errorf("%q ≥ 1.2: %v %v, want %v", v, got, ok, want)
		}
	}
}

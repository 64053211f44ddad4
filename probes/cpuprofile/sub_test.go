package cpuprofile

import "testing"

// A later window's profile is the counts added since the earlier one;
// tuples that did not grow are left out.
func TestProfileSub(t *testing.T) {
	a := Sample{PID: 1, TID: 1, CPU: 0, Comm: "a", KernelStack: []uint64{1, 2}, Count: 5}
	b := Sample{PID: 2, TID: 2, CPU: 1, Comm: "b", UserStack: []uint64{3}, Count: 4}
	prev := Profile{Samples: []Sample{a, b}, Lost: Lost{CountsFull: 1}}
	a2, c := a, Sample{PID: 3, Comm: "c", Count: 2}
	a2.Count = 8
	cur := Profile{Samples: []Sample{a2, b, c}, Lost: Lost{CountsFull: 3, UserStackFaults: 1}}
	d := cur.Sub(prev)
	if len(d.Samples) != 2 || d.Samples[0].Count != 3 || d.Samples[1].Comm != "c" || d.Total() != 5 {
		t.Errorf("Sub = %+v", d.Samples)
	}
	if d.Lost.CountsFull != 2 || d.Lost.UserStackFaults != 1 {
		t.Errorf("lost = %+v", d.Lost)
	}
}

// Package hsperf reads HotSpot's hsperfdata: the memory-mapped performance
// counters every HotSpot JVM publishes in /tmp/hsperfdata_<user>/<pid>
// (OpenJDK's perfMemory format, the file jstat reads). Reading it needs no
// attach and cannot disturb the JVM, so perfscope samples it for GC
// counters, heap spaces and "has the VM finished starting".
//
// The file is found through /proc/PID/root so that a JVM in another mount
// namespace (a container with a private /tmp) is read at its own path, and
// under the pid the JVM sees itself (its namespaced pid, NStgid).
package hsperf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// Errors callers branch on.
var (
	// ErrNotFound: the JVM publishes no hsperfdata file (not a HotSpot
	// JVM, -XX:-UsePerfData, or -XX:+PerfDisableSharedMem).
	ErrNotFound = errors.New("no hsperfdata file")
	// ErrTruncated: the file is shorter than its header says.
	ErrTruncated = errors.New("hsperfdata file is truncated")
	// ErrBadMagic: the file is not in perfMemory format.
	ErrBadMagic = errors.New("not an hsperfdata file (bad magic)")
)

// The prologue and entry layouts are fixed by OpenJDK's perfMemory.hpp
// (PerfDataPrologue, PerfDataEntry); both are written in the JVM's native
// byte order, which the prologue's byte_order field names.
const (
	magic            = 0xcafec0c0
	prologueSize     = 32
	entryHeaderSize  = 20
	byteOrderBig     = 0
	byteOrderLittle  = 1
	typeLong         = 'J'
	typeByte         = 'B'
	unitsString      = 5
	maxEntries       = 1 << 16
	maxNameLength    = 1 << 10
	maxVectorLength  = 1 << 20
	entryOffsetField = 24
)

// Units is a counter's unit as the JVM declares it.
type Units uint8

const (
	UnitsNone   Units = 1
	UnitsBytes  Units = 2
	UnitsTicks  Units = 3
	UnitsEvents Units = 4
	UnitsString Units = 5
	UnitsHertz  Units = 6
)

// Counter is one named value: a long or a string.
type Counter struct {
	Name   string
	Units  Units
	Long   int64
	String string
	// IsString says which of Long and String holds the value.
	IsString bool
}

// Snapshot is every counter at one moment.
type Snapshot struct {
	Major, Minor int
	BigEndian    bool
	// Accessible is false while the JVM is still creating the file.
	Accessible bool
	Counters   map[string]Counter
}

// Parse decodes a perfMemory image.
func Parse(b []byte) (*Snapshot, error) {
	if len(b) < prologueSize {
		return nil, fmt.Errorf("%w: %d bytes, the header alone is %d", ErrTruncated, len(b), prologueSize)
	}
	if binary.BigEndian.Uint32(b[0:4]) != magic {
		return nil, ErrBadMagic
	}
	s := &Snapshot{Major: int(b[5]), Minor: int(b[6]), Accessible: b[7] != 0, Counters: map[string]Counter{}}
	var bo binary.ByteOrder
	switch b[4] {
	case byteOrderBig:
		bo, s.BigEndian = binary.BigEndian, true
	case byteOrderLittle:
		bo = binary.LittleEndian
	default:
		return nil, fmt.Errorf("hsperfdata: unknown byte order %d", b[4])
	}
	used := int64(int32(bo.Uint32(b[8:12])))
	if used > int64(len(b)) {
		return nil, fmt.Errorf("%w: header says %d bytes are used, file has %d", ErrTruncated, used, len(b))
	}
	off := int64(int32(bo.Uint32(b[entryOffsetField:])))
	n := int64(int32(bo.Uint32(b[28:32])))
	if n < 0 || n > maxEntries || off < prologueSize {
		return nil, fmt.Errorf("hsperfdata: implausible header (%d entries at offset %d)", n, off)
	}
	for i := int64(0); i < n; i++ {
		if off+entryHeaderSize > int64(len(b)) {
			return nil, fmt.Errorf("%w: entry %d of %d starts past the end", ErrTruncated, i, n)
		}
		e := b[off:]
		length := int64(int32(bo.Uint32(e[0:4])))
		nameOff := int64(int32(bo.Uint32(e[4:8])))
		vecLen := int64(int32(bo.Uint32(e[8:12])))
		dataType, units := e[12], Units(e[14])
		dataOff := int64(int32(bo.Uint32(e[16:20])))
		if length < entryHeaderSize || off+length > int64(len(b)) {
			return nil, fmt.Errorf("%w: entry %d has length %d at offset %d", ErrTruncated, i, length, off)
		}
		if nameOff < entryHeaderSize || nameOff >= length || dataOff >= length || dataOff < nameOff || vecLen < 0 || vecLen > maxVectorLength {
			return nil, fmt.Errorf("hsperfdata: corrupt entry %d at offset %d", i, off)
		}
		name := cString(e[nameOff:min(dataOff, nameOff+maxNameLength)])
		c := Counter{Name: name, Units: units}
		switch {
		case dataType == typeLong && vecLen == 0:
			if dataOff+8 > length {
				return nil, fmt.Errorf("%w: counter %s", ErrTruncated, name)
			}
			c.Long = int64(bo.Uint64(e[dataOff:]))
		case dataType == typeByte && vecLen > 0:
			if dataOff+vecLen > length {
				return nil, fmt.Errorf("%w: counter %s", ErrTruncated, name)
			}
			c.String, c.IsString = cString(e[dataOff:dataOff+vecLen]), true
		default:
			// Other vector types exist in the format but HotSpot publishes
			// none; skip them rather than fail on a future JVM.
			off += length
			continue
		}
		s.Counters[name] = c
		off += length
	}
	return s, nil
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// Long is a long counter's value; ok is false when the JVM does not publish
// it (counters differ between collectors and JDK versions).
func (s *Snapshot) Long(name string) (int64, bool) {
	c, ok := s.Counters[name]
	if !ok || c.IsString {
		return 0, false
	}
	return c.Long, true
}

// String is a string counter's value.
func (s *Snapshot) String(name string) (string, bool) {
	c, ok := s.Counters[name]
	if !ok || !c.IsString {
		return "", false
	}
	return c.String, true
}

// TicksToDuration converts HotSpot's high-resolution ticks (GC times,
// timestamps) with sun.os.hrt.frequency.
func (s *Snapshot) TicksToDuration(ticks int64) time.Duration {
	f, ok := s.Long("sun.os.hrt.frequency")
	if !ok || f <= 0 {
		return 0
	}
	return time.Duration(float64(ticks) / float64(f) * float64(time.Second))
}

// Read decodes a whole hsperfdata file from r.
func Read(r io.Reader) (*Snapshot, error) {
	b, err := io.ReadAll(io.LimitReader(r, math.MaxInt32))
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

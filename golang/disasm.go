package golang

import (
	"errors"
	"fmt"

	"golang.org/x/arch/x86/x86asm"
)

// instructions decodes fn's code, calling visit with each instruction's
// link-time address; a byte that does not decode ends the walk with an
// error (padding after the last RET is INT3, which decodes).
func (b *Binary) instructions(fn Function, visit func(pc uint64, in x86asm.Inst) bool) error {
	code, err := b.Code(fn)
	if err != nil {
		return err
	}
	for off := 0; off < len(code); {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return fmt.Errorf("%s+%#x: %w", fn.Name, off, err)
		}
		if !visit(fn.Entry+uint64(off), in) {
			return nil
		}
		off += in.Len
	}
	return nil
}

// EmulatedProbe says whether a uprobe at pc in fn lands on a PUSH of a
// register, an instruction the kernel's x86 uprobes can emulate instead
// of stepping it out of line: one trap a hit instead of a breakpoint and a
// single-step. A function's body in Go starts with PUSHQ BP after its stack
// check; an indirect CALL (the call of Pool.New) is stepped.
func (b *Binary) EmulatedProbe(fn Function, pc uint64) (bool, error) {
	push := false
	found := false
	err := b.instructions(fn, func(at uint64, in x86asm.Inst) bool {
		if at == pc {
			found, push = true, in.Op == x86asm.PUSH && isReg(in.Args[0])
		}
		return at < pc
	})
	if err == nil && !found {
		err = fmt.Errorf("%s: no instruction starts at %#x", fn.Name, pc)
	}
	return push, err
}

func isReg(a x86asm.Arg) bool {
	_, ok := a.(x86asm.Reg)
	return ok
}

// ripTarget is the address a RIP-relative memory operand of in at pc
// names, if it has one.
func ripTarget(pc uint64, in x86asm.Inst) (uint64, bool) {
	for _, a := range in.Args {
		if m, ok := a.(x86asm.Mem); ok && m.Base == x86asm.RIP && m.Index == 0 {
			return uint64(int64(pc) + int64(in.Len) + m.Disp), true
		}
	}
	return 0, false
}

// MemProfileRateAddr finds runtime.MemProfileRate's link-time address:
// from the symbol table when there is one, else from the code that reads
// it, runtime.nextSample or, where the compiler inlined that (every
// release tested), runtime.profilealloc (see rateLoad). how says which.
// The tests check the result against the symbol table of the same build
// for every supported release.
func (b *Binary) MemProfileRateAddr() (addr uint64, how string, err error) {
	if a, _, ok := b.DataSymbol("runtime.MemProfileRate"); ok {
		return a, "symbol table", nil
	}
	return b.memProfileRateFromCode()
}

func (b *Binary) memProfileRateFromCode() (addr uint64, how string, err error) {
	if b.Arch != "amd64" {
		return 0, "", fmt.Errorf("%w: reading code of a %s binary", ErrUnsupportedGo, b.Arch)
	}
	var tried []string
	for _, name := range []string{"runtime.nextSample", "runtime.profilealloc"} {
		fn, ok := b.Func(name)
		if !ok {
			continue
		}
		tried = append(tried, name)
		found, err := rateLoad(b, fn)
		if err != nil || found == 0 {
			continue
		}
		return found, "code of " + name, nil
	}
	if len(tried) == 0 {
		return 0, "", errors.New("neither runtime.nextSample nor runtime.profilealloc is in the function table")
	}
	return 0, "", fmt.Errorf("no load of the rate found in %v", tried)
}

// PoolNewCall finds the instruction in sync.(*Pool).Get that calls the
// pool's New function: Get's only indirect call (a closure call through a
// register). Its link-time address, or an error when Get has none or more
// than one (a layout perfscope does not know).
func (b *Binary) PoolNewCall() (uint64, error) {
	fn, ok := b.Func("sync.(*Pool).Get")
	if !ok {
		return 0, errors.New("sync.(*Pool).Get is not in the program")
	}
	var calls []uint64
	err := b.instructions(fn, func(pc uint64, in x86asm.Inst) bool {
		if in.Op == x86asm.CALL {
			if _, direct := in.Args[0].(x86asm.Rel); !direct {
				calls = append(calls, pc)
			}
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	if len(calls) != 1 {
		return 0, fmt.Errorf("%w: sync.(*Pool).Get has %d indirect calls, expected the one to New", ErrUnsupportedGo, len(calls))
	}
	return calls[0], nil
}

// rateLoad finds the rate's address in fn: an 8-byte RIP-relative load of
// pointer-free data (.noptrdata, or .noptrbss where Go 1.19 initialises
// the rate at run time; .bss holds pointers such as runtime.mcache0,
// which profilealloc loads first) whose register is then compared with 1
// (nextSample's "MemProfileRate == 1", Go 1.19-1.23), or loaded twice
// (Go 1.24 stores it into the mcache, then tests it for 0).
func rateLoad(b *Binary, fn Function) (uint64, error) {
	type load struct {
		target uint64
		reg    x86asm.Reg
	}
	var loads []load
	seen := map[uint64]int{}
	var found uint64
	var pending *load
	left := 0
	err := b.instructions(fn, func(pc uint64, in x86asm.Inst) bool {
		if pending != nil && left > 0 {
			left--
			if in.Op == x86asm.CMP && in.Args[0] == pending.reg {
				if imm, ok := in.Args[1].(x86asm.Imm); ok && imm == 1 {
					found = pending.target
					return false
				}
			}
		}
		if in.Op != x86asm.MOV || in.MemBytes != 8 {
			return true
		}
		reg, toReg := in.Args[0].(x86asm.Reg)
		t, ok := ripTarget(pc, in)
		if !toReg || !ok || !b.pointerFreeData(t) {
			return true
		}
		seen[t]++
		if seen[t] == 2 {
			found = t
			return false
		}
		loads = append(loads, load{t, reg})
		pending, left = &loads[len(loads)-1], 3
		return true
	})
	return found, err
}

// stackCheckAt says whether fn's first instructions read the goroutine's
// stack guard, 16(R14).
func (b *Binary) stackCheckAt(fn Function) bool {
	found := false
	n := 0
	b.instructions(fn, func(pc uint64, in x86asm.Inst) bool {
		for _, a := range in.Args {
			if m, ok := a.(x86asm.Mem); ok && m.Base == x86asm.R14 && m.Disp == 16 {
				found = true
			}
		}
		n++
		return !found && n < 3
	})
	return found
}

// BodyStart is where fn's body begins: after the stack check of its
// prologue (CMP SP or R12 with the goroutine's stack guard, 16(R14), then
// a conditional jump to the code that grows the stack), or its entry
// when it has none. A uprobe at the entry fires twice for a call that
// grows the stack, since morestack returns to the entry; after the check
// it fires once. The argument registers and the frame pointer are still
// the caller's there.
func (b *Binary) BodyStart(fn Function) (uint64, error) {
	start := fn.Entry
	sawCheck := false
	n := 0
	err := b.instructions(fn, func(pc uint64, in x86asm.Inst) bool {
		n++
		if sawCheck {
			if in.Op == x86asm.JBE || in.Op == x86asm.JB || in.Op == x86asm.JLE {
				start = pc + uint64(in.Len)
			}
			return false
		}
		if in.Op == x86asm.CMP {
			for _, a := range in.Args {
				if m, ok := a.(x86asm.Mem); ok && m.Base == x86asm.R14 && m.Disp == 16 {
					sawCheck = true
				}
			}
		}
		return n < 4
	})
	return start, err
}

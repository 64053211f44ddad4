package testutil

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The programs below make threads wait in known ways, for the off-CPU
// probe's tests. They are C with pthreads rather than Go: the Go runtime
// parks goroutines and idle threads on futexes of its own, so a Go
// program's off-CPU time has no crisp truth. Each prints its thread ids
// on one line ("tids 12 13 14"), waits for a line on standard input (so
// the probe can be attached first), runs, then prints what it measured
// itself ("key value" lines) and exits. alarm bounds each in case the
// test dies first.
//
// Each named function reaches libc through one more noinline function:
// libc is built without frame pointers, so a frame-pointer walk from
// inside it skips the function that called it (its frame pointer still
// names the caller's frame) and finds only the one above.

// Function names the programs wait or wake in (noinline, frame pointers).
const (
	// WaitForLockFunction calls pthread_mutex_lock: the lock's call site.
	WaitForLockFunction = "wait_for_lock"
	// ReleaseLockFunction calls pthread_mutex_unlock: the waker's site.
	ReleaseLockFunction = "release_lock"
	// HoldLockFunction sleeps while holding the lock.
	HoldLockFunction = "hold_lock"
	// WaitForPacketFunction blocks in recv on a UDP socket.
	WaitForPacketFunction = "wait_for_packet"
	// SendPacketFunction sends the datagram that wakes it.
	SendPacketFunction = "send_packet"
	// SpinFunctionOffCPU burns CPU without blocking.
	SpinFunctionOffCPU = "spin_without_blocking"
	// SleepFunction sleeps on a timer (nanosleep).
	SleepFunction = "sleep_on_timer"
)

const waitsCommon = `
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

static long long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static pthread_barrier_t ready;
static int tids[256];

static void announce_and_wait(int n) {
	printf("tids");
	for (int i = 0; i < n; i++)
		printf(" %d", tids[i]);
	printf("\n");
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		exit(3);
}
`

// timedWaitsC: THREADS threads each wait ROUNDS times, in one of two ways
// (MODE), and time their own waits:
//   - "lock": a convoy: each takes one mutex and sleeps US while holding
//     it; waited_ns is the time spent in pthread_mutex_lock, summed;
//   - "sleep": each sleeps US in nanosleep; slept_ns is the time spent
//     sleeping, summed, and sleeps how many sleeps that was.
const timedWaitsC = waitsCommon + `
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long long waited[256];
static int lock_mode, rounds, wait_us;

__attribute__((noinline)) void lock_mutex(void) { pthread_mutex_lock(&m); __asm__ volatile(""); }
__attribute__((noinline)) void unlock_mutex(void) { pthread_mutex_unlock(&m); __asm__ volatile(""); }
__attribute__((noinline)) void nanosleep_us(int us) {
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
	nanosleep(&ts, 0);
	__asm__ volatile("");
}
__attribute__((noinline)) void wait_for_lock(void) { lock_mutex(); __asm__ volatile(""); }
__attribute__((noinline)) void release_lock(void) { unlock_mutex(); __asm__ volatile(""); }
__attribute__((noinline)) void hold_lock(void) { nanosleep_us(wait_us); __asm__ volatile(""); }
__attribute__((noinline)) void sleep_on_timer(void) { nanosleep_us(wait_us); __asm__ volatile(""); }

static void *worker(void *arg) {
	long i = (long)arg;
	tids[i] = syscall(SYS_gettid);
	pthread_barrier_wait(&ready);
	pthread_barrier_wait(&ready);
	for (int r = 0; r < rounds; r++) {
		long long t0 = now_ns();
		if (!lock_mode) {
			sleep_on_timer();
			waited[i] += now_ns() - t0;
			continue;
		}
		wait_for_lock();
		waited[i] += now_ns() - t0;
		hold_lock();
		release_lock();
		/* Let a woken waiter take the lock rather than barging back in. */
		sched_yield();
	}
	return 0;
}

int main(int argc, char **argv) {
	alarm(60);
	lock_mode = strcmp(argv[1], "lock") == 0;
	int n = atoi(argv[2]);
	wait_us = atoi(argv[3]);
	rounds = atoi(argv[4]);
	pthread_t th[256];
	pthread_barrier_init(&ready, 0, n + 1);
	for (long i = 0; i < n; i++)
		pthread_create(&th[i], 0, worker, (void *)i);
	pthread_barrier_wait(&ready);
	announce_and_wait(n);
	pthread_barrier_wait(&ready);
	long long total = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], 0);
		total += waited[i];
	}
	if (lock_mode) {
		printf("waited_ns %lld\n", total);
	} else {
		printf("slept_ns %lld\n", total);
		printf("sleeps %d\n", n * rounds);
	}
	return 0;
}
`

// sockReadC: a thread blocks in recv on a loopback UDP socket ROUNDS
// times; the main thread sends it one datagram every GAP_US.
const sockReadC = waitsCommon + `
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

static int rx, tx, rounds, gap_us;
static struct sockaddr_in to;

__attribute__((noinline)) void recv_datagram(void) {
	char b[64];
	recv(rx, b, sizeof b, 0);
	__asm__ volatile("");
}
__attribute__((noinline)) void send_datagram(void) {
	sendto(tx, "x", 1, 0, (struct sockaddr *)&to, sizeof to);
	__asm__ volatile("");
}
__attribute__((noinline)) void wait_for_packet(void) { recv_datagram(); __asm__ volatile(""); }
__attribute__((noinline)) void send_packet(void) { send_datagram(); __asm__ volatile(""); }

static void *reader(void *arg) {
	tids[1] = syscall(SYS_gettid);
	pthread_barrier_wait(&ready);
	pthread_barrier_wait(&ready);
	for (int r = 0; r < rounds; r++)
		wait_for_packet();
	return 0;
}

int main(int argc, char **argv) {
	alarm(60);
	rounds = atoi(argv[1]);
	gap_us = atoi(argv[2]);
	rx = socket(AF_INET, SOCK_DGRAM, 0);
	tx = socket(AF_INET, SOCK_DGRAM, 0);
	to.sin_family = AF_INET;
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(rx, (struct sockaddr *)&to, sizeof to)) { perror("bind"); return 2; }
	socklen_t len = sizeof to;
	getsockname(rx, (struct sockaddr *)&to, &len);
	tids[0] = syscall(SYS_gettid);
	pthread_t th;
	pthread_barrier_init(&ready, 0, 2);
	pthread_create(&th, 0, reader, 0);
	pthread_barrier_wait(&ready);
	announce_and_wait(2);
	pthread_barrier_wait(&ready);
	for (int r = 0; r < rounds; r++) {
		struct timespec ts = {0, gap_us * 1000L};
		nanosleep(&ts, 0);
		send_packet();
	}
	pthread_join(th, 0);
	printf("sent %d\n", rounds);
	return 0;
}
`

// spinnersC: THREADS threads burn CPU for SECONDS without blocking, all
// pinned to CPU (so THREADS runnable threads share one CPU).
const spinnersC = waitsCommon + `
static volatile unsigned long sink;
static double seconds;

__attribute__((noinline)) void spin_without_blocking(void) {
	long long end = now_ns() + (long long)(seconds * 1e9);
	while (now_ns() < end)
		for (int i = 0; i < 100000; i++)
			sink += i;
}

static void *spinner(void *arg) {
	long i = (long)arg;
	tids[i] = syscall(SYS_gettid);
	pthread_barrier_wait(&ready);
	pthread_barrier_wait(&ready);
	spin_without_blocking();
	return 0;
}

int main(int argc, char **argv) {
	alarm(60);
	int n = atoi(argv[1]);
	seconds = atof(argv[2]);
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(atoi(argv[3]), &set);
	if (sched_setaffinity(0, sizeof set, &set)) { perror("sched_setaffinity"); return 2; }
	pthread_t th[256];
	pthread_barrier_init(&ready, 0, n + 1);
	for (long i = 0; i < n; i++)
		pthread_create(&th[i], 0, spinner, (void *)i);
	pthread_barrier_wait(&ready);
	announce_and_wait(n);
	pthread_barrier_wait(&ready);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], 0);
	printf("spun %d\n", n);
	return 0;
}
`

// WaitProgram is one of the programs above, started and announced.
type WaitProgram struct {
	Cmd *exec.Cmd
	// TIDs are its worker threads (for SockRead: the main thread, which
	// sends, then the reader).
	TIDs  []int
	stdin io.WriteCloser
	out   *bufio.Reader
}

// PID is the program's process id.
func (p *WaitProgram) PID() int { return p.Cmd.Process.Pid }

// Go lets the program run.
func (p *WaitProgram) Go(t testing.TB) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
		t.Fatalf("start the wait program: %v", err)
	}
}

// Wait waits for the program to exit (at most limit) and returns the
// numbers it printed.
func (p *WaitProgram) Wait(t testing.TB, limit time.Duration) map[string]int64 {
	t.Helper()
	done := make(chan error, 1)
	out := map[string]int64{}
	go func() {
		for {
			line, err := p.out.ReadString('\n')
			if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					out[k] = n
				}
			}
			if err != nil {
				break
			}
		}
		done <- p.Cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wait program: %v", err)
		}
	case <-time.After(limit):
		p.Cmd.Process.Kill()
		t.Fatalf("wait program still running after %v", limit)
	}
	return out
}

func startWaitProgram(t testing.TB, source string, args ...string) *WaitProgram {
	t.Helper()
	cmd := exec.Command(BuildC(t, source, "-pthread"), args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	p := &WaitProgram{Cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	line, err := p.out.ReadString('\n')
	fields := strings.Fields(line)
	if err != nil || len(fields) < 2 || fields[0] != "tids" {
		t.Fatalf("wait program announced %q: %v", line, err)
	}
	for _, f := range fields[1:] {
		tid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("wait program announced %q", line)
		}
		p.TIDs = append(p.TIDs, tid)
	}
	return p
}

// StartLockConvoy starts threads threads that each take one mutex rounds
// times and sleep hold while holding it; its "waited_ns" is the time they
// spent in pthread_mutex_lock, summed.
func StartLockConvoy(t testing.TB, threads int, hold time.Duration, rounds int) *WaitProgram {
	return startWaitProgram(t, timedWaitsC, "lock", strconv.Itoa(threads), strconv.Itoa(int(hold/time.Microsecond)), strconv.Itoa(rounds))
}

// StartSocketReader starts a thread that reads rounds datagrams from a
// loopback UDP socket, each sent by the main thread gap after the last.
// TIDs are the sender (main thread) and the reader.
func StartSocketReader(t testing.TB, rounds int, gap time.Duration) *WaitProgram {
	return startWaitProgram(t, sockReadC, strconv.Itoa(rounds), strconv.Itoa(int(gap/time.Microsecond)))
}

// StartSleepers starts threads threads that each sleep d on a timer
// rounds times; its "slept_ns" is the time they spent in nanosleep,
// summed, and "sleeps" how many sleeps that was.
func StartSleepers(t testing.TB, threads int, d time.Duration, rounds int) *WaitProgram {
	return startWaitProgram(t, timedWaitsC, "sleep", strconv.Itoa(threads), strconv.Itoa(int(d/time.Microsecond)), strconv.Itoa(rounds))
}

// StartSpinners starts threads threads that burn CPU for d, all pinned
// to cpu.
func StartSpinners(t testing.TB, threads int, d time.Duration, cpu int) *WaitProgram {
	return startWaitProgram(t, spinnersC, strconv.Itoa(threads), fmt.Sprint(d.Seconds()), strconv.Itoa(cpu))
}

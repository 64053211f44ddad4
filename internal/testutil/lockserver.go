package testutil

import (
	"bufio"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lockServerC is an HTTP/1.1 server with a thread per connection whose
// every request takes one mutex and sleeps HOLD_US holding it: requests
// are served one at a time whatever the concurrency, so throughput is
// 1/HOLD at most and stops rising at concurrency 1, the added requests
// waiting at the lock (wait_for_lock). It prints "port N" once listening
// on 127.0.0.1; alarm bounds its life (LIFE_S) in case the test dies.
const lockServerC = `
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int hold_us;

__attribute__((noinline)) void lock_mutex(void) { pthread_mutex_lock(&m); __asm__ volatile(""); }
__attribute__((noinline)) void unlock_mutex(void) { pthread_mutex_unlock(&m); __asm__ volatile(""); }
__attribute__((noinline)) void sleep_us(int us) {
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
	nanosleep(&ts, 0);
	__asm__ volatile("");
}
__attribute__((noinline)) void wait_for_lock(void) { lock_mutex(); __asm__ volatile(""); }
__attribute__((noinline)) void release_lock(void) { unlock_mutex(); __asm__ volatile(""); }
__attribute__((noinline)) void hold_lock(void) { sleep_us(hold_us); __asm__ volatile(""); }

static void *serve(void *arg) {
	int fd = (int)(long)arg;
	char buf[8192];
	size_t have = 0;
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok";
	for (;;) {
		ssize_t r = recv(fd, buf + have, sizeof buf - have - 1, 0);
		if (r <= 0)
			break;
		have += r;
		buf[have] = 0;
		char *end;
		while ((end = strstr(buf, "\r\n\r\n"))) {
			wait_for_lock();
			hold_lock();
			release_lock();
			if (write(fd, resp, sizeof resp - 1) < 0)
				goto out;
			size_t used = end + 4 - buf;
			memmove(buf, buf + used, have - used + 1);
			have -= used;
		}
		if (have >= sizeof buf - 1)
			break;
	}
out:
	close(fd);
	return 0;
}

int main(int argc, char **argv) {
	hold_us = atoi(argv[1]);
	alarm(atoi(argv[2]));
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 128) || getsockname(s, (struct sockaddr *)&a, &len))
		return 2;
	printf("port %d\n", ntohs(a.sin_port));
	fflush(stdout);
	for (;;) {
		int c = accept(s, 0, 0);
		if (c < 0)
			continue;
		pthread_t t;
		if (pthread_create(&t, 0, serve, (void *)(long)c))
			close(c);
		else
			pthread_detach(t);
	}
}
`

// StartLockServer starts the lock server (lockServerC) holding its lock
// hold per request, for at most life, and returns it and its URL. It is
// killed when t ends.
func StartLockServer(t testing.TB, hold, life time.Duration) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(BuildC(t, lockServerC, "-pthread"), strconv.Itoa(int(hold/time.Microsecond)), strconv.Itoa(int(life.Seconds())))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "port ")
	if err != nil || !ok {
		t.Fatalf("lock server announced %q: %v", line, err)
	}
	return cmd, fmt.Sprintf("http://127.0.0.1:%s/", port)
}

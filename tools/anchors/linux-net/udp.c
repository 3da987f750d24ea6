/*
 * /init of a Linux guest for the UDP anchors (see README.md): loads the virtio-net modules,
 * brings up eth0 with a 10.x address and a permanent ARP entry for its peer, runs one
 * measurement and powers the machine off.
 *
 * Parameters come from the kernel command line (unknown `key=value` words reach init as
 * environment variables):
 *   udp_role     client | server | idle | sender | receiver
 *   udp_addr     this machine's address (10.x.y.z, /24)
 *   udp_peer     the peer's address
 *   udp_peermac  the peer's MAC (aa:bb:cc:dd:ee:ff)
 *   udp_size     payload bytes (8 to 1472)
 *   udp_rounds   measured round trips (or datagrams for sender/receiver)
 *   udp_warmup   round trips (datagrams) before the measured ones
 *   udp_seconds  idle: seconds of virtual time to sit idle (measured)
 *   udp_settle   idle: seconds of virtual time to sit idle before them
 *   udp_spin     client: 2 x udp_spin more instructions per round trip (a check of the counts)
 *
 * Busy time is the guest's own clock (CLOCK_MONOTONIC: under `-icount shift=0` one
 * nanosecond of it is one instruction while the CPU runs) minus the kernel's idle time
 * (tick_sched's idle_sleeptime and iowait_sleeptime from /proc/timer_list, in ns: the time in
 * the idle loop less the interrupts taken there). Every result is one line starting
 * "RESULT " on the console.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PORT 7777
#define MODULES "/modules"
#define MAX_PAYLOAD 1472
/* Sequence number of the datagram that ends a run (client and sender to the other side). */
#define SEQ_DONE 0xffffffffu

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stdout, "ERROR udp: ");
	vfprintf(stdout, fmt, ap);
	if (errno)
		fprintf(stdout, ": %s", strerror(errno));
	fprintf(stdout, "\n");
	va_end(ap);
	fflush(stdout);
	sync();
	reboot(RB_POWER_OFF);
	_exit(1);
}

static const char *param(const char *name, const char *fallback)
{
	const char *v = getenv(name);
	if (v && *v)
		return v;
	if (fallback)
		return fallback;
	errno = 0;
	die("missing parameter %s", name);
	return NULL;
}

static long num_param(const char *name, const char *fallback)
{
	char *end;
	const char *v = param(name, fallback);
	long n = strtol(v, &end, 10);
	if (*end || n < 0) {
		errno = 0;
		die("parameter %s=%s is not a number", name, v);
	}
	return n;
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* One reading of the clock and of the kernel's idle accounts of CPU 0. */
struct snap {
	uint64_t clock_ns;
	uint64_t idle_ns;
	uint64_t idle_calls;
	uint64_t idle_sleeps;
};

static char timer_list[256 * 1024];

static uint64_t field(const char *text, const char *name)
{
	const char *p = strstr(text, name);
	if (!p) {
		errno = 0;
		die("no %s in /proc/timer_list", name);
	}
	p += strlen(name);
	while (*p == ' ' || *p == ':')
		p++;
	return strtoull(p, NULL, 10);
}

static struct snap snapshot(void)
{
	struct snap s;
	size_t len = 0;
	ssize_t n;
	int fd = open("/proc/timer_list", O_RDONLY);
	if (fd < 0)
		die("open /proc/timer_list");
	while ((n = read(fd, timer_list + len, sizeof timer_list - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	timer_list[len] = 0;
	/* One CPU: the first tick_sched block is CPU 0's. */
	s.idle_ns = field(timer_list, ".idle_sleeptime") + field(timer_list, ".iowait_sleeptime");
	s.idle_calls = field(timer_list, ".idle_calls");
	s.idle_sleeps = field(timer_list, ".idle_sleeps");
	s.clock_ns = now_ns();
	/* The marker count.c's QEMU plugin prints its instruction count at (a no-op otherwise). */
	__asm__ volatile("nopl 0x54455353(%%rax)" ::: "memory");
	return s;
}

static void report(const char *what, const struct snap *a, const struct snap *b, long count,
		   const char *unit)
{
	uint64_t total = b->clock_ns - a->clock_ns;
	uint64_t idle = b->idle_ns - a->idle_ns;
	uint64_t busy = total - idle;
	printf("RESULT %s total_ns=%llu idle_ns=%llu busy_ns=%llu count=%ld busy_per_%s=%.1f "
	       "idle_calls=%llu idle_sleeps=%llu\n",
	       what, (unsigned long long)total, (unsigned long long)idle, (unsigned long long)busy,
	       count, unit, (double)busy / (double)count,
	       (unsigned long long)(b->idle_calls - a->idle_calls),
	       (unsigned long long)(b->idle_sleeps - a->idle_sleeps));
	fflush(stdout);
}

static void load_modules(void)
{
	struct dirent **names;
	int n = scandir(MODULES, &names, NULL, alphasort);
	if (n < 0)
		die("scandir " MODULES);
	for (int i = 0; i < n; i++) {
		char path[512];
		if (names[i]->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, MODULES "/%s", names[i]->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			die("open %s", path);
		if (syscall(SYS_finit_module, fd, "", 0) != 0 && errno != EEXIST)
			die("finit_module %s", path);
		close(fd);
	}
}

static void parse_mac(const char *text, unsigned char mac[6])
{
	unsigned v[6];
	if (sscanf(text, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) {
		errno = 0;
		die("bad MAC %s", text);
	}
	for (int i = 0; i < 6; i++)
		mac[i] = (unsigned char)v[i];
}

static struct sockaddr_in inet(const char *text, int port)
{
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	if (inet_pton(AF_INET, text, &a.sin_addr) != 1 || (ntohl(a.sin_addr.s_addr) >> 24) != 10) {
		errno = 0;
		die("address %s is not a 10.x address", text);
	}
	return a;
}

/* eth0 up with addr/24, and the peer's MAC as a permanent ARP entry (no ARP traffic). */
static void configure(const char *addr, const char *peer, const char *peermac)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct ifreq ifr;
	struct sockaddr_in a = inet(addr, 0), mask = inet("10.0.0.0", 0);
	mask.sin_addr.s_addr = htonl(0xffffff00u);

	for (int tries = 0;; tries++) {
		memset(&ifr, 0, sizeof ifr);
		strcpy(ifr.ifr_name, "eth0");
		if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0)
			break;
		if (tries == 100)
			die("no eth0");
		usleep(10000);
	}
	memcpy(&ifr.ifr_addr, &a, sizeof a);
	if (ioctl(s, SIOCSIFADDR, &ifr) != 0)
		die("SIOCSIFADDR");
	memcpy(&ifr.ifr_netmask, &mask, sizeof mask);
	if (ioctl(s, SIOCSIFNETMASK, &ifr) != 0)
		die("SIOCSIFNETMASK");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
		die("SIOCGIFFLAGS");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
		die("SIOCSIFFLAGS");

	if (peer) {
		struct arpreq arp;
		struct sockaddr_in p = inet(peer, 0);
		memset(&arp, 0, sizeof arp);
		memcpy(&arp.arp_pa, &p, sizeof p);
		arp.arp_ha.sa_family = ARPHRD_ETHER;
		parse_mac(peermac, (unsigned char *)arp.arp_ha.sa_data);
		arp.arp_flags = ATF_PERM | ATF_COM;
		strcpy(arp.arp_dev, "eth0");
		if (ioctl(s, SIOCSARP, &arp) != 0)
			die("SIOCSARP");
	}
	close(s);
}

static int udp_socket(const char *addr)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = inet(addr, PORT);
	if (s < 0)
		die("socket");
	if (bind(s, (struct sockaddr *)&a, sizeof a) != 0)
		die("bind");
	return s;
}

static unsigned char out[MAX_PAYLOAD], in[MAX_PAYLOAD + 1];

static void fill(uint32_t seq, long size)
{
	memcpy(out, &seq, 4);
	for (long i = 4; i < size; i++)
		out[i] = (unsigned char)(seq + i);
}

static int check(uint32_t seq, long size, ssize_t got)
{
	if (got != size)
		return 0;
	for (long i = 4; i < size; i++)
		if (in[i] != (unsigned char)(seq + i))
			return 0;
	return 1;
}

/* Sends seq and waits for its echo; resends after `timeout_ms` (0: never). */
static long round_trip(int s, uint32_t seq, long size, int timeout_ms)
{
	long resent = 0;
	fill(seq, size);
	for (;;) {
		if (send(s, out, (size_t)size, 0) != size)
			die("send");
		for (;;) {
			struct pollfd p = {.fd = s, .events = POLLIN};
			if (timeout_ms && poll(&p, 1, timeout_ms) == 0)
				break;
			ssize_t got = recv(s, in, sizeof in, 0);
			if (got < 0 && errno == ECONNREFUSED && timeout_ms)
				continue; /* the peer's port is not bound yet: resend at the timeout */
			if (got < 0)
				die("recv");
			uint32_t echoed;
			memcpy(&echoed, in, 4);
			if (got >= 4 && echoed == seq) {
				if (!check(seq, size, got)) {
					errno = 0;
					die("echo of %u corrupt (%zd bytes)", seq, got);
				}
				return resent;
			}
		}
		resent++;
	}
}

/*
 * Ends a run: sends the end marker until the peer echoes it (at most 20 times, 100 ms apart),
 * so it is not left waiting when this machine powers off with the marker still queued.
 */
static void finish(int s)
{
	fill(SEQ_DONE, 8);
	for (int i = 0; i < 20; i++) {
		send(s, out, 8, 0);
		struct pollfd p = {.fd = s, .events = POLLIN};
		while (poll(&p, 1, 100) > 0) {
			uint32_t seq;
			if (recv(s, in, sizeof in, 0) >= 4 && (memcpy(&seq, in, 4), seq == SEQ_DONE))
				return;
		}
	}
}

/*
 * Receives one datagram; once the measured part is over (`over`), gives up after 5 s of
 * silence (the end marker was lost) and returns 0.
 */
static ssize_t receive(int s, int over)
{
	if (over) {
		struct pollfd p = {.fd = s, .events = POLLIN};
		if (poll(&p, 1, 5000) == 0)
			return 0;
	}
	ssize_t got = recv(s, in, sizeof in, 0);
	if (got < 0)
		die("recv");
	return got;
}

static void null_calls(void)
{
	const long n = 100000;
	uint64_t t0 = now_ns();
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
	uint64_t t1 = now_ns();
	printf("RESULT getppid ns_per_call=%.1f\n", (double)(t1 - t0) / n);
	/* What one reading adds to a window (each window holds one). */
	struct snap a = snapshot(), b = snapshot();
	printf("RESULT reading busy_ns=%llu\n",
	       (unsigned long long)((b.clock_ns - a.clock_ns) - (b.idle_ns - a.idle_ns)));
}

/* Exactly 2n + 1 instructions: a known amount of work. */
static void spin(long n)
{
	if (n)
		__asm__ volatile("1: dec %0\n\tjnz 1b" : "+r"(n) :: "cc");
}

static void client(int s, long size, long warmup, long rounds, long extra)
{
	long resent = 0;
	/* The server may still be booting: resend every 100 ms until it answers. */
	for (long i = 0; i < warmup; i++)
		round_trip(s, (uint32_t)i, size, 100);
	struct snap a = snapshot();
	for (long i = 0; i < rounds; i++) {
		resent += round_trip(s, (uint32_t)(warmup + i), size, 1000);
		spin(extra);
	}
	struct snap b = snapshot();
	report("client", &a, &b, rounds, "round_trip");
	printf("RESULT client_resent count=%ld\n", resent);
	finish(s);
}

static void server(int s, long size, long warmup, long rounds)
{
	struct snap a = {0}, b;
	long echoed = 0;
	uint32_t last = SEQ_DONE;
	for (;;) {
		ssize_t got = receive(s, echoed >= warmup + rounds);
		if (got == 0)
			break;
		uint32_t seq;
		memcpy(&seq, in, 4);
		if (got >= 4 && seq == SEQ_DONE) {
			send(s, in, 8, 0);
			break;
		}
		if (got != size)
			continue;
		if (send(s, in, (size_t)got, 0) != got)
			die("send");
		if (seq == last)
			continue; /* a resent one */
		last = seq;
		echoed++;
		if (seq == (uint32_t)(warmup - 1))
			a = snapshot();
		if (seq == (uint32_t)(warmup + rounds - 1))
			b = snapshot();
	}
	if (echoed < warmup + rounds) {
		errno = 0;
		die("server echoed %ld of %ld", echoed, warmup + rounds);
	}
	report("server", &a, &b, rounds, "round_trip");
}

/*
 * The stream: the receiver acknowledges every STREAM_WINDOW-th datagram (and the last) with
 * its 8-byte header, and the sender sends the next window only then, so no more than a
 * window is ever in flight and nothing is lost for want of buffers.
 */
#define STREAM_WINDOW 64

static int window_end(uint32_t seq, long warmup, long rounds)
{
	long i = (long)seq - warmup;
	return (i + 1) % STREAM_WINDOW == 0 || i == rounds - 1;
}

static void sender(int s, long size, long warmup, long rounds)
{
	long timeouts = 0;
	/* Warm-up as round trips, so the receiver is up; then a one-way stream. */
	for (long i = 0; i < warmup; i++)
		round_trip(s, (uint32_t)i, 8, 100);
	struct snap a = snapshot();
	for (long i = 0; i < rounds; i++) {
		uint32_t seq = (uint32_t)(warmup + i);
		fill(seq, size);
		if (send(s, out, (size_t)size, 0) != size)
			die("send");
		if (!window_end(seq, warmup, rounds))
			continue;
		for (;;) {
			struct pollfd p = {.fd = s, .events = POLLIN};
			if (poll(&p, 1, 1000) == 0) {
				timeouts++; /* the window's last datagram or its ack was lost */
				break;
			}
			uint32_t acked;
			if (recv(s, in, sizeof in, 0) == 8 && (memcpy(&acked, in, 4), acked == seq))
				break;
		}
	}
	struct snap b = snapshot();
	report("sender", &a, &b, rounds, "datagram");
	printf("RESULT sender_timeouts count=%ld\n", timeouts);
	finish(s);
}

static void receiver(int s, long size, long warmup, long rounds)
{
	struct snap a = {0}, b = {0};
	long received = 0, bad = 0;
	int ended = 0;
	for (;;) {
		ssize_t got = receive(s, ended);
		if (got == 0)
			break;
		uint32_t seq;
		memcpy(&seq, in, 4);
		if (got >= 4 && seq == SEQ_DONE) {
			if (!ended)
				b = snapshot(); /* the last one was lost */
			send(s, in, 8, 0);
			break;
		}
		if (got == 8 && seq < (uint32_t)warmup) {
			if (send(s, in, 8, 0) != 8)
				die("send");
			if (seq == (uint32_t)(warmup - 1))
				a = snapshot();
			continue;
		}
		if (!check(seq, size, got))
			bad++;
		received++;
		if (window_end(seq, warmup, rounds) && send(s, in, 8, 0) != 8)
			die("send");
		if (seq == (uint32_t)(warmup + rounds - 1)) {
			b = snapshot();
			ended = 1;
		}
	}
	report("receiver", &a, &b, received, "datagram");
	printf("RESULT receiver_lost count=%ld bad=%ld\n", rounds - received, bad);
}

int main(void)
{
	mkdir("/proc", 0555);
	if (mount("proc", "/proc", "proc", 0, NULL) != 0)
		die("mount /proc");
	int fd = open("/dev/console", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
	}
	const char *role = param("udp_role", NULL);
	const char *addr = param("udp_addr", NULL);
	const char *peer = strcmp(role, "idle") ? param("udp_peer", NULL) : NULL;
	load_modules();
	configure(addr, peer, peer ? param("udp_peermac", NULL) : NULL);
	printf("RESULT up role=%s addr=%s\n", role, addr);
	fflush(stdout);

	if (!strcmp(role, "idle")) {
		long seconds = num_param("udp_seconds", "10");
		/* The work left from booting (deferred initcalls, the TSC's calibration) ends first. */
		sleep((unsigned)num_param("udp_settle", "10"));
		struct snap a = snapshot();
		sleep((unsigned)seconds);
		struct snap b = snapshot();
		report("idle", &a, &b, seconds, "second");
	} else {
		long size = num_param("udp_size", "64");
		long warmup = num_param("udp_warmup", "1000");
		long rounds = num_param("udp_rounds", "10000");
		if (size < 8 || size > MAX_PAYLOAD || warmup < 1 || rounds < 1) {
			errno = 0;
			die("udp_size must be 8 to %d, udp_warmup and udp_rounds at least 1", MAX_PAYLOAD);
		}
		int s = udp_socket(addr);
		struct sockaddr_in p = inet(peer, PORT);
		if (connect(s, (struct sockaddr *)&p, sizeof p) != 0)
			die("connect");
		if (!strcmp(role, "client")) {
			null_calls();
			client(s, size, warmup, rounds, num_param("udp_spin", "0"));
		} else if (!strcmp(role, "server")) {
			server(s, size, warmup, rounds);
		} else if (!strcmp(role, "sender")) {
			sender(s, size, warmup, rounds);
		} else if (!strcmp(role, "receiver")) {
			receiver(s, size, warmup, rounds);
		} else {
			errno = 0;
			die("unknown udp_role %s", role);
		}
	}
	printf("RESULT done\n");
	fflush(stdout);
	sync();
	reboot(RB_POWER_OFF);
	return 0;
}

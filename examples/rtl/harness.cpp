// harness.cpp: runs the Verilator model of ina_agg as a switch on TAP
// ports. Port r of the design is the persistent TAP PREFIX-sw<r> (made by
// `inaemu tap up --wired`); every frame the TAP hands us is fed into the
// design's port r beat by beat (8 bytes a beat), every frame the design
// emits on port r is written to the TAP. The model is clocked only while
// it has work; cycles are counted and reported on exit at a stated clock.
//
// No frame the design sends is dropped by the harness: a TAP write the
// kernel refuses for now (EAGAIN, ENOBUFS) stays queued on its port and is
// retried when poll says the TAP is writable; a port with OUT_MAX frames
// queued holds m_tready low, so the design waits (backpressure) instead.
// Only a write that keeps failing for WRITE_GIVEUP_MS, or fails with
// another error, loses a frame: that is reported at once on stderr and in
// the exit line ("HARNESS DROPPED"), since a result lost there would
// otherwise be blamed on the design.
//
// Flags: the job flags of `inaemu switch` as inaemu passes them in
// $INAEMU_DUT_FLAGS (--workers --mode --window --msg-len --mtu --dtype
// --transport --release; the rest are accepted and ignored), --prefix P
// (or --tap P), --bug NAME or +bug=NAME, --clock-mhz F (default 250), and
// for testing the harness itself --refuse-writes N (every Nth TAP write
// is treated as if the kernel had returned EAGAIN: the retry path runs).
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "Vina_agg.h"
#include "verilated.h"

static volatile sig_atomic_t stopping = 0;
static void on_signal(int) { stopping = 1; }

static const int NPORT = 8;           // the design's NPORT parameter
static const int NSLOT = 1024;        // its NSLOT
static const size_t QUEUE_MAX = 8192; // frames waiting per port before reads pause
static const size_t OUT_MAX = 4096;   // frames queued for a TAP before m_tready goes low
static const int WRITE_GIVEUP_MS = 5000; // a TAP refusing one frame this long loses it

struct Port {
    int fd = -1;
    std::deque<std::vector<uint8_t>> in;  // frames waiting to enter the design
    size_t off = 0;                       // bytes of in.front() already taken
    std::vector<uint8_t> out;             // the frame the design is emitting
    std::deque<std::vector<uint8_t>> outq; // frames the TAP has not taken yet
    std::chrono::steady_clock::time_point refused; // when outq.front() was first refused
};

static uint64_t write_retries = 0, harness_drops = 0, writes = 0, refuse_every = 0;

// flush writes port p's queued frames to its TAP until the queue is empty
// or the kernel refuses one for now; a frame is given up only after
// WRITE_GIVEUP_MS of refusals or on a hard error, loudly.
static void flush(Port& p, int r) {
    while (!p.outq.empty()) {
        auto& fr = p.outq.front();
        ssize_t n;
        writes++;
        if (refuse_every && writes % refuse_every == 0) {
            n = -1;
            errno = EAGAIN;
        } else
            n = write(p.fd, fr.data(), fr.size());
        if (n >= 0) {
            p.outq.pop_front();
            p.refused = {};
            continue;
        }
        if (errno == EINTR) continue;
        auto now = std::chrono::steady_clock::now();
        bool transient = errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS;
        if (transient) {
            write_retries++;
            if (p.refused == std::chrono::steady_clock::time_point{}) p.refused = now;
            if (now - p.refused < std::chrono::milliseconds(WRITE_GIVEUP_MS)) return;
        }
        fprintf(stderr, "rtl-agg: HARNESS DROPPED a %zu-byte frame the design sent on port %d: write: %s%s\n",
                fr.size(), r, strerror(errno), transient ? " for 5 s" : "");
        harness_drops++;
        p.outq.pop_front();
        p.refused = {};
    }
}

static int usage(const char* msg) {
    fprintf(stderr, "rtl-agg: %s\n", msg);
    return 2;
}

// open_tap attaches to the existing TAP name (TUNSETIFF on a name that does
// not exist would make a new, non-persistent one).
static int open_tap(const std::string& name) {
    if (access(("/sys/class/net/" + name + "/tun_flags").c_str(), F_OK) != 0) {
        errno = ENODEV;
        return -1;
    }
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
    if (fd < 0) return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int main(int argc, char** argv) {
    std::map<std::string, std::string> f = {
        {"workers", "8"}, {"mode", "netreduce"}, {"window", "2"}, {"msg-len", "170"}, {"mtu", "1024"},
        {"dtype", "f32"}, {"transport", "v2-ipv4"}, {"release", "safe"}, {"bug", "none"}, {"prefix", ""},
        {"clock-mhz", "250"}, {"refuse-writes", "0"}};
    static const char* ignored[] = {"tensor", "seed", "pattern", "compress", "compress-rate", "bcast",
                                    "timeout", "retry-cnt", "nic", "max-time", nullptr};
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a.rfind("+bug=", 0) == 0) { f["bug"] = a.substr(5); continue; }
        if (a.rfind("--", 0) != 0) return usage(("unexpected argument " + a).c_str());
        std::string k = a.substr(2), v;
        size_t eq = k.find('=');
        if (eq != std::string::npos) { v = k.substr(eq + 1); k = k.substr(0, eq); }
        else {
            if (i + 1 >= argc) return usage(("flag --" + k + " needs a value").c_str());
            v = argv[++i];
        }
        if (k == "tap") k = "prefix";
        bool ign = false;
        for (const char** p = ignored; *p; p++) ign |= (k == *p);
        if (ign) continue;
        if (!f.count(k)) return usage(("unknown flag --" + k).c_str());
        f[k] = v;
    }
    auto num = [&](const char* k, int lo, int hi, int* out) -> bool {
        char* end;
        long v = strtol(f[k].c_str(), &end, 10);
        if (*end || f[k].empty() || v < lo || v > hi) {
            fprintf(stderr, "rtl-agg: --%s %s: want %d..%d\n", k, f[k].c_str(), lo, hi);
            return false;
        }
        *out = int(v);
        return true;
    };
    int workers, window, msglen, mtu;
    if (!num("workers", 2, NPORT, &workers) || !num("window", 1, 64, &window) ||
        !num("msg-len", 1, 255, &msglen) || !num("mtu", 256, 4096, &mtu))
        return 2;
    if (mtu != 256 && mtu != 512 && mtu != 1024 && mtu != 2048 && mtu != 4096)
        return usage("--mtu: want 256, 512, 1024, 2048 or 4096");
    if (2 * window * msglen > NSLOT) {
        fprintf(stderr, "rtl-agg: --window %d --msg-len %d: 2 x window x msg-len must be at most %d (the design's NSLOT)\n",
                window, msglen, NSLOT);
        return 2;
    }
    std::map<std::string, int> dtypes = {{"f32", 0}, {"i32", 1}, {"f16", 2}};
    std::map<std::string, int> transports = {{"v2-ipv4", 0}, {"v1", 1}, {"v2-ipv6", 2}};
    std::map<std::string, int> bugs = {{"none", 0}, {"psn-off-by-one", 1}, {"no-icrc-check", 2},
                                       {"lane-overflow", 3}, {"early-wrap", 4}};
    if (!dtypes.count(f["dtype"])) return usage("--dtype: want f32, i32 or f16");
    if (!transports.count(f["transport"])) return usage("--transport: want v2-ipv4, v2-ipv6 or v1");
    if (!bugs.count(f["bug"])) return usage("--bug: want none, psn-off-by-one, no-icrc-check, lane-overflow or early-wrap");
    if (f["mode"] != "netreduce" && f["mode"] != "ring") return usage("--mode: want netreduce or ring");
    if (f["release"] != "safe") return usage("--release: the design implements safe only");
    if (f["prefix"].empty()) return usage("--prefix P is required (the TAP ports P-sw0 .. P-sw<H-1>)");
    char* mend;
    double mhz = strtod(f["clock-mhz"].c_str(), &mend);
    if (f["clock-mhz"].empty() || *mend || !std::isfinite(mhz) || mhz <= 0)
        return usage(("--clock-mhz " + f["clock-mhz"] + ": want a positive number").c_str());
    int refuse;
    if (!num("refuse-writes", 0, 1000000, &refuse)) return 2;
    refuse_every = uint64_t(refuse);

    std::vector<Port> ports(workers);
    for (int r = 0; r < workers; r++) {
        std::string name = f["prefix"] + "-sw" + std::to_string(r);
        ports[r].fd = open_tap(name);
        if (ports[r].fd < 0) {
            fprintf(stderr, "rtl-agg: open TAP %s: %s (make it with 'inaemu tap up --wired --prefix %s --workers %d'; root)\n",
                    name.c_str(), errno == ENODEV ? "no such TAP" : strerror(errno), f["prefix"].c_str(), workers);
            for (int k = 0; k < r; k++) close(ports[k].fd);
            return 1;
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);

    auto ctx = std::make_unique<VerilatedContext>();
    ctx->commandArgs(argc, argv);
    auto top = std::make_unique<Vina_agg>(ctx.get());
    top->cfg_agg = f["mode"] == "netreduce";
    top->cfg_workers = workers;
    top->cfg_window = window;
    top->cfg_msglen = msglen;
    top->cfg_mtu = mtu;
    top->cfg_dtype = dtypes[f["dtype"]];
    top->cfg_enc = transports[f["transport"]];
    top->cfg_bug = bugs[f["bug"]];
    for (int p = 0; p < NPORT; p++) { top->s_tvalid[p] = 0; top->m_tready[p] = 1; }
    uint64_t cycles = 0;
    auto tick = [&]() {
        top->clk = 0; top->eval();
        top->clk = 1; top->eval();
        cycles++;
    };
    top->rst = 1;
    tick(); tick();
    top->rst = 0;

    fprintf(stderr, "rtl-agg: ready on %s-sw0..%s-sw%d (%s, %d workers, window %d, %d-packet messages, MTU %d, %s, %s, bug %s, clock %.0f MHz)\n",
            f["prefix"].c_str(), f["prefix"].c_str(), workers - 1, f["mode"].c_str(), workers, window, msglen, mtu,
            f["dtype"].c_str(), f["transport"].c_str(), f["bug"].c_str(), mhz);

    uint64_t tap_drops = 0;
    std::vector<uint8_t> buf(65536);
    std::vector<struct pollfd> pfds(workers);
    while (!stopping) {
        bool pending = top->busy, queued = false, full = false;
        for (int r = 0; r < workers; r++) {
            flush(ports[r], r);
            pending |= !ports[r].in.empty();
            queued |= !ports[r].outq.empty();
            full |= ports[r].outq.size() >= OUT_MAX;
        }
        for (int r = 0; r < workers; r++) {
            pfds[r].fd = ports[r].fd;
            pfds[r].events = (ports[r].in.size() < QUEUE_MAX ? POLLIN : 0) | (ports[r].outq.empty() ? 0 : POLLOUT);
            pfds[r].revents = 0;
        }
        // A TAP that refused a write may still poll writable (ENOBUFS):
        // wait a millisecond before retrying rather than spin.
        int n = poll(pfds.data(), workers, pending && !full ? 0 : queued ? 1 : 200);
        if (n < 0 && errno != EINTR) { perror("rtl-agg: poll"); return 1; }
        for (int r = 0; r < workers && n > 0; r++) {
            if (!(pfds[r].revents & POLLIN)) continue;
            for (int k = 0; k < 64 && ports[r].in.size() < QUEUE_MAX; k++) {
                ssize_t got = read(ports[r].fd, buf.data(), buf.size());
                if (got <= 0) break;
                if (got > 9216) { tap_drops++; continue; }
                ports[r].in.emplace_back(buf.begin(), buf.begin() + got);
            }
        }
        // Clock the design until it is idle with nothing waiting, at most a
        // slice of cycles before looking at the TAPs again.
        for (int c = 0; c < 20000; c++) {
            bool work = top->busy, blocked = false;
            for (int r = 0; r < workers; r++) {
                top->m_tready[r] = ports[r].outq.size() < OUT_MAX;
                blocked |= !top->m_tready[r];
            }
            if (blocked) break;  // back to poll: the TAP must take frames first
            for (int r = 0; r < workers; r++) {
                Port& p = ports[r];
                if (p.in.empty()) { top->s_tvalid[r] = 0; continue; }
                work = true;
                const auto& fr = p.in.front();
                uint64_t w = 0;
                size_t k = 0;
                for (; k < 8 && p.off + k < fr.size(); k++) w |= uint64_t(fr[p.off + k]) << (8 * k);
                top->s_tdata[r] = w;
                top->s_tkeep[r] = uint8_t((1u << k) - 1);
                top->s_tlast[r] = p.off + k >= fr.size();
                top->s_tvalid[r] = 1;
            }
            if (!work) break;
            top->clk = 0;
            top->eval();
            // What moves at this rising edge.
            bool took[NPORT] = {};
            for (int r = 0; r < workers; r++) {
                took[r] = top->s_tvalid[r] && top->s_tready[r];
                if (top->m_tvalid[r] && top->m_tready[r]) {
                    uint64_t w = top->m_tdata[r];
                    for (int k = 0; k < 8; k++)
                        if (top->m_tkeep[r] >> k & 1) ports[r].out.push_back(uint8_t(w >> (8 * k)));
                    if (top->m_tlast[r]) {
                        ports[r].outq.push_back(std::move(ports[r].out));
                        ports[r].out.clear();
                        if (ports[r].outq.size() == 1) flush(ports[r], r);
                    }
                }
            }
            top->clk = 1;
            top->eval();
            cycles++;
            for (int r = 0; r < workers; r++) {
                if (!took[r]) continue;
                Port& p = ports[r];
                p.off += 8;
                if (p.off >= p.in.front().size()) { p.in.pop_front(); p.off = 0; }
            }
        }
    }
    // What the design sent before the stop still goes out (briefly: the
    // TAP may be gone already).
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    for (bool left = true; left && std::chrono::steady_clock::now() < until;) {
        left = false;
        for (int r = 0; r < workers; r++) {
            flush(ports[r], r);
            left |= !ports[r].outq.empty();
        }
        if (left) poll(nullptr, 0, 1);
    }
    uint64_t unsent = 0;
    for (auto& p : ports) unsent += p.outq.size();
    top->final();
    double fin = double(top->n_frames_in), busy = double(top->n_busy_cycles), bytes = double(top->n_bytes_in);
    double cpf = fin > 0 ? busy / fin : 0, cpb = bytes > 0 ? busy / bytes : 0;
    fprintf(stderr,
            "rtl-agg: %llu frames in (%llu bytes), %llu out; %llu aggregated slots, %llu results, %llu re-sends, "
            "%llu ICRC drops, %llu other drops, %llu forwarded; %llu busy cycles of %llu: %.1f cycles/frame, "
            "%.3f cycles/byte; at %.0f MHz %.1f Mframes/s, %.2f Gb/s of ingress; %llu TAP write retries, "
            "%llu oversized frames read; %s\n",
            (unsigned long long)top->n_frames_in, (unsigned long long)top->n_bytes_in,
            (unsigned long long)top->n_frames_out, (unsigned long long)top->n_aggregated,
            (unsigned long long)top->n_results, (unsigned long long)top->n_resends,
            (unsigned long long)top->n_icrc_drops, (unsigned long long)top->n_other_drops,
            (unsigned long long)top->n_forwards, (unsigned long long)top->n_busy_cycles,
            (unsigned long long)cycles, cpf, cpb, mhz, cpf > 0 ? mhz / cpf : 0,
            cpb > 0 ? mhz * 8 / cpb / 1000 : 0, (unsigned long long)write_retries, (unsigned long long)tap_drops,
            harness_drops ? ("HARNESS DROPPED " + std::to_string(harness_drops) + " frames the design sent").c_str()
                          : "no frame the design sent was dropped by the harness");
    if (unsent) fprintf(stderr, "rtl-agg: %llu frames the design sent were still queued at the stop\n", (unsigned long long)unsent);
    for (auto& p : ports) close(p.fd);
    return 0;
}

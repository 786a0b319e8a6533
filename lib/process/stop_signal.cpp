// stop_signal.cpp — see stop_signal.h.
#include "lib/process/stop_signal.h"

#include <csignal>

namespace hg {

namespace {

// The first signal received, 0 for none. A handler may only touch lock-free atomics or
// volatile sig_atomic_t; a plain int store is what sig_atomic_t is.
volatile std::sig_atomic_t g_first_signal = 0;

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};

void on_stop_signal(int sig) {
    if (g_first_signal == 0) g_first_signal = sig;
}

}  // namespace

void install_stop_signals() {
    struct sigaction sa = {};
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (int sig : kStopSignals) sigaddset(&sa.sa_mask, sig);  // one handler at a time
    for (int sig : kStopSignals) sigaction(sig, &sa, nullptr);
}

bool stop_requested() { return g_first_signal != 0; }

const char* stop_signal_name() {
    switch (g_first_signal) {
        case SIGINT: return "SIGINT";
        case SIGTERM: return "SIGTERM";
        case SIGHUP: return "SIGHUP";
        case SIGUSR1: return "SIGUSR1";
        case SIGUSR2: return "SIGUSR2";
        default: return "";
    }
}

void clear_stop_request() { g_first_signal = 0; }

}  // namespace hg

// stop_signal.h — the signals that end a long job, turned into a request to stop gracefully.
//
// Whatever ends a job sends one of these: a terminal SIGINT (Ctrl-C) or SIGHUP (the terminal
// closed), `timeout`, `kill` and container runtimes SIGTERM (then SIGKILL after a grace
// period), batch schedulers SIGTERM or, as a warning before preemption, SIGUSR1 / SIGUSR2.
// After install_stop_signals(), each of them only records itself: the training loop
// (train_loop.h) sees stop_requested() before its next step, saves a checkpoint at the current
// step (atomically: safetensors.h) and ends the run. A second signal, even one arriving while
// that checkpoint is being written, is recorded the same way and changes nothing: the save
// finishes and the run ends once. SA_RESTART restarts the system calls a signal interrupts, so
// a save in progress does not fail with EINTR either. SIGKILL cannot be caught; the atomic
// save is what protects the checkpoint then.
#pragma once

namespace hg {

// Installs the recording handler for SIGINT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2.
void install_stop_signals();
// True once any of them has arrived.
bool stop_requested();
// The first of them that arrived ("SIGTERM"), or "" when none has.
const char* stop_signal_name();
// Forgets any signal received (the handlers stay): for tests that drive several runs.
void clear_stop_request();

}  // namespace hg

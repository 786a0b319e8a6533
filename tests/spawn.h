// spawn.h — an app started in the background, for tests that signal or kill it while it runs.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/app_runner.h"

namespace hg::test {

// A command started in the background (through sh, which exec's it: pid is the app itself),
// its stdout and stderr going to `log`.
struct Spawned {
    pid_t pid = -1;
    std::string log;
};

inline Spawned spawn(const std::string& cmd, const std::string& log) {
    Spawned s{-1, log};
    const std::string line = "exec " + cmd + " > " + log + " 2>&1";
    s.pid = fork();
    REQUIRE(s.pid >= 0);
    if (s.pid == 0) {
        execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    return s;
}

// The exit status as Run::status has it (128 + signal if killed).
inline int wait_exit(const Spawned& s) {
    int st = 0;
    REQUIRE(waitpid(s.pid, &st, 0) == s.pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Waits until `log` contains `text` (true), or the process has ended or 60 s have passed (false).
inline bool wait_for_output(const Spawned& s, const std::string& text) {
    for (int i = 0; i < 6000; i++) {
        if (read_bytes(s.log).find(text) != std::string::npos) return true;
        siginfo_t info{};  // WNOWAIT: an ended process stays for wait_exit to collect
        if (waitid(P_PID, id_t(s.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != 0) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

}  // namespace hg::test

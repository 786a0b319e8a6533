// Data-parallel training across processes: `mpirun -np 2 build/train` against the same run in
// one process. Hidden from `make test` ([.]): `make test-mpi` runs them in an MPI build. Each
// test launches mpirun itself (--oversubscribe: two ranks on any machine, one thread each).
//
//   equivalence   2 ranks × batch B == 1 rank × batch 2B of the same rows: the same losses,
//                 and the same weights to float rounding (below)
//   determinism   the same 2-rank run twice gives byte-identical checkpoints
//   resume        2 ranks, stop, resume on 2 ranks == one straight run; 1 rank is refused
//   a dead rank   SIGKILL to rank 1 ends the whole job (no hang), the last checkpoint loads;
//                 SIGINT to rank 1 alone stops both ranks at one step; an error ends the job
#include "tests/catch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lib/checkpoint/checkpoint.h"
#include "lib/process/dist.h"
#include "tests/app_runner.h"

using namespace hg;
using namespace hg::test;
namespace fs = std::filesystem;

namespace {

// A corpus with some variety, so different rows give visibly different gradients.
std::string varied_text() {
    std::string s;
    const char* lines[] = {"to be or not to be, that is the question;\n", "whether 'tis nobler in the mind to suffer\n",
                           "the slings and arrows of outrageous fortune,\n",
                           "or to take arms against a sea of troubles.\n"};
    for (int i = 0; i < 60; i++) s += lines[i % 4], s += lines[(i * 7 + 1) % 4];
    return s;
}

// The two-rank launcher. Without a timeout of our own a hang would stall CI, so every launch
// is bounded (timeout exits 124; nothing here takes more than a few seconds).
std::string mpirun(int np) {
    return "timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np " + std::to_string(np) + " ";
}

// A small model (1 thread per rank), dropout 0 so that every rank's rows see the same function.
const std::string kModel =
    " --n_layer=2 --n_head=2 --n_embd=32 --block_size=16 --eval_iters=3 --threads=1 --warmup_iters=2"
    " --learning_rate=3e-3 --log_interval=1 --dropout=0";

// The (iter, loss, val_loss) columns of log.csv, without the timing columns.
std::vector<std::array<double, 3>> losses(const fs::path& csv) {
    std::vector<std::array<double, 3>> rows;
    std::istringstream in(read_bytes(csv));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
        std::vector<std::string> f;
        std::stringstream ls(line);
        for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
        if (f.size() < 4) continue;
        rows.push_back({std::stod(f[1]), std::stod(f[2]), f[3].empty() ? 0.0 : std::stod(f[3])});
    }
    return rows;
}

// max |a − b| over every model tensor (not the optimizer's), and max |a| for scale.
std::pair<double, double> weight_diff(const Checkpoint& a, const Checkpoint& b) {
    double diff = 0, scale = 0;
    for (const std::string& name : a.file.names()) {
        if (name.rfind("optim.", 0) == 0) continue;
        const auto &ea = a.file.get(name), &eb = b.file.get(name);
        REQUIRE(ea.nbytes() == eb.nbytes());
        for (size_t i = 0; i < ea.nbytes() / 4; i++) {
            float x, y;
            std::memcpy(&x, ea.data + 4 * i, 4);
            std::memcpy(&y, eb.data + 4 * i, 4);
            diff = std::max(diff, double(std::fabs(x - y)));
            scale = std::max(scale, double(std::fabs(x)));
        }
    }
    return {diff, scale};
}

void require_mpi() {
    REQUIRE(dist_built_with_mpi());  // make test-mpi builds with MPI=1
    REQUIRE(std::system("command -v mpirun >/dev/null 2>&1") == 0);
}

}  // namespace

TEST_CASE("2 ranks with batch B equal 1 rank with batch 2B of the same rows", "[.][mpi][equivalence]") {
    require_mpi();
    TempDir tmp("handgrad-mpi");
    const std::string data = write_file(tmp.path / "data.txt", varied_text());
    const std::string two = (tmp.path / "two").string(), one = (tmp.path / "one").string(),
                      half = (tmp.path / "half").string();
    const std::string common = kModel + " --data=" + data + " --max_iters=10 --eval_interval=5";
    Run r2 = run(mpirun(2) + bin("train") + common + " --batch_size=4 --out_dir=" + two);
    INFO(r2.output);
    REQUIRE(r2.status == 0);
    // Only rank 0 speaks: one model line, one "done" line.
    CHECK(r2.output.find("ranks: 2") != std::string::npos);
    CHECK(r2.output.find("effective batch 8") != std::string::npos);
    CHECK(r2.output.find("model: ") == r2.output.rfind("model: "));
    Run r1 = run(bin("train") + common + " --batch_size=8 --out_dir=" + one);
    INFO(r1.output);
    REQUIRE(r1.status == 0);

    // The same losses: every logged training loss and every train/val evaluation. They are
    // means over the same 8·16 tokens, summed in another order: equal to ~1e-6.
    const auto l2 = losses(two + "/log.csv"), l1 = losses(one + "/log.csv");
    REQUIRE(l2.size() == l1.size());
    REQUIRE(l1.size() == 10 + 3);  // a line per iteration, evaluations at 0, 5, 10
    for (size_t i = 0; i < l1.size(); i++) {
        INFO("log row " << i);
        CHECK(l2[i][0] == l1[i][0]);
        CHECK(l2[i][1] == Approx(l1[i][1]).margin(2e-5));
        CHECK(l2[i][2] == Approx(l1[i][2]).margin(2e-5));
    }

    // The same weights after 10 AdamW steps, to float rounding. The 2-rank gradient is
    // (Σ rows 0-3)/2 + (Σ rows 4-7)/2 instead of one sgemm over rows 0-7: a relative
    // difference of ~1e-7 per gradient element, which AdamW's g/√v amplifies where v is tiny
    // (a near-zero gradient's sign can flip, and the step is ±lr either way). Measured:
    // max |Δw| 7.8e-6 with max |w| ≈ 1. We allow 1e-4 · max |w|, well below one step's change
    // (lr = 3e-3), and check below that leaving out rank 1's rows is seen (Δw 2.4e-2).
    const Checkpoint c2 = Checkpoint::load(two + "/ckpt.safetensors"), c1 = Checkpoint::load(one + "/ckpt.safetensors");
    CHECK(c2.progress.iter_num == 10);
    CHECK(c2.progress.world_size == 2);
    CHECK(c1.progress.world_size == 1);
    const auto [diff, scale] = weight_diff(c2, c1);
    INFO("max |w_2ranks - w_1rank| = " << diff << ", max |w| = " << scale);
    CHECK(diff <= 1e-4 * scale);

    // The check can fail: rank 1's rows count. One rank alone with batch 4 (rank 0's rows)
    // ends far from the 2-rank run.
    REQUIRE(run(bin("train") + common + " --batch_size=4 --out_dir=" + half).status == 0);
    const auto [diff_half, scale_half] = weight_diff(c2, Checkpoint::load(half + "/ckpt.safetensors"));
    INFO("max |w_2ranks - w_rank0_alone| = " << diff_half);
    CHECK(diff_half > 100 * diff);
    CHECK(diff_half > 1e-3 * scale_half);
}

TEST_CASE("one process with 2 batch threads is 2 ranks of one thread, to the bit", "[.][mpi][batch_threads]") {
    require_mpi();
    TempDir tmp("handgrad-mpi");
    const std::string data = write_file(tmp.path / "data.txt", varied_text());
    const std::string ranks = (tmp.path / "ranks").string(), threads = (tmp.path / "threads").string();
    // Dropout on and 2 micro-steps: rows, masks, scaling and the sum must all line up. One backend
    // for both (auto may time them apart and choose two).
    const std::string common = kModel + " --data=" + data +
                               " --max_iters=6 --eval_interval=3 --gradient_accumulation_steps=2 --dropout=0.1"
                               " --matmul=openblas";
    Run r2 = run(mpirun(2) + bin("train") + common + " --batch_size=3 --out_dir=" + ranks);
    INFO(r2.output);
    REQUIRE(r2.status == 0);
    Run r1 = run(bin("train") + common + " --batch_size=6 --batch_threads=2 --out_dir=" + threads);
    INFO(r1.output);
    REQUIRE(r1.status == 0);
    CHECK(losses(ranks + "/log.csv") == losses(threads + "/log.csv"));
    CHECK(check_same_tensors(ranks + "/ckpt.safetensors", threads + "/ckpt.safetensors") > 10);
}

TEST_CASE("the same 2-rank run twice gives byte-identical checkpoints and losses", "[.][mpi][determinism]") {
    require_mpi();
    TempDir tmp("handgrad-mpi");
    const std::string data = write_file(tmp.path / "data.txt", varied_text());
    const std::string a = (tmp.path / "a").string(), b = (tmp.path / "b").string();
    // Dropout on: each rank's masks come from (seed, iter, micro-step, rank), not from timing.
    const std::string common =
        kModel + " --data=" + data +
        " --max_iters=8 --eval_interval=4 --batch_size=3 --gradient_accumulation_steps=2 --dropout=0.1";
    Run ra = run(mpirun(2) + bin("train") + common + " --out_dir=" + a);
    INFO(ra.output);
    REQUIRE(ra.status == 0);
    Run rb = run(mpirun(2) + bin("train") + common + " --out_dir=" + b);
    INFO(rb.output);
    REQUIRE(rb.status == 0);
    const std::string ca = read_bytes(a + "/ckpt.safetensors"), cb = read_bytes(b + "/ckpt.safetensors");
    REQUIRE(ca.size() > 1000);
    CHECK(ca == cb);  // weights, AdamW moments, sampler state, metadata: every byte
    CHECK(losses(a + "/log.csv") == losses(b + "/log.csv"));
}

TEST_CASE("a 2-rank run resumes exactly on 2 ranks and is refused on 1", "[.][mpi][resume]") {
    require_mpi();
    TempDir tmp("handgrad-mpi");
    const std::string data = write_file(tmp.path / "data.txt", varied_text());
    const std::string a = (tmp.path / "a").string(), b = (tmp.path / "b").string();
    const std::string common = kModel + " --data=" + data + " --eval_interval=4 --batch_size=3 --lr_decay_iters=8";
    REQUIRE(run(mpirun(2) + bin("train") + common + " --max_iters=8 --out_dir=" + a).status == 0);
    REQUIRE(run(mpirun(2) + bin("train") + common + " --max_iters=4 --out_dir=" + b).status == 0);

    Run alone = run(bin("train") + common + " --max_iters=8 --init_from=resume --out_dir=" + b);
    INFO(alone.output);
    CHECK(alone.status == 1);
    CHECK(alone.output.find("error: the checkpoint was written by a run on 2 rank(s) and this run has 1") !=
          std::string::npos);
    CHECK(alone.output.find("mpirun -np 2") != std::string::npos);

    Run resumed = run(mpirun(2) + bin("train") + common + " --max_iters=8 --init_from=resume --out_dir=" + b);
    INFO(resumed.output);
    REQUIRE(resumed.status == 0);
    CHECK(read_bytes(a + "/ckpt.safetensors") == read_bytes(b + "/ckpt.safetensors"));
}

// The pid of the rank `rank` of a job whose command line mentions `marker`, or 0.
static pid_t find_rank(const std::string& marker, int rank) {
    for (const auto& e : fs::directory_iterator("/proc")) {
        const std::string name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::string cmd = read_bytes(e.path() / "cmdline"), env = read_bytes(e.path() / "environ");
        for (char& c : cmd) c = c ? c : ' ';
        const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
        if (cmd.find(marker) == std::string::npos || cmd.find("mpirun") != std::string::npos) continue;
        for (size_t at = env.find(want); at != std::string::npos; at = env.find(want, at + 1))
            if ((at == 0 || env[at - 1] == '\0') && (at + want.size() == env.size() || env[at + want.size()] == '\0'))
                return pid_t(std::stol(name));
    }
    return 0;
}

// A 2-rank run far too long to finish, saving every 2 iterations, in the background: its output
// goes to `log`, its exit code to `status` when it ends.
struct BackgroundJob {
    fs::path out, log, status;
    BackgroundJob(const fs::path& dir, const std::string& data)
        : out(dir / "out"), log(dir / "job.log"), status(dir / "job.status") {
        const std::string job = mpirun(2) + bin("train") + kModel + " --data=" + data +
                                " --max_iters=1000000 --eval_interval=2 --eval_iters=1 --batch_size=2 --out_dir=" +
                                out.string();
        REQUIRE(std::system(
                    ("(" + job + " > " + log.string() + " 2>&1; echo $? > " + status.string() + ") &").c_str()) == 0);
    }
    static bool wait_for(const std::function<bool()>& cond, double seconds) {
        const auto t0 = std::chrono::steady_clock::now();
        while (!cond() && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return cond();
    }
    // Training is under way once a checkpoint has been written twice.
    bool wait_saving() {
        return wait_for(
            [&] {
                const std::string l = read_bytes(log);
                return l.find("saved checkpoint") != l.rfind("saved checkpoint");
            },
            60);
    }
    // The exit code; -1 if the job has not ended in time (the 120 s timeout gives 124 before that).
    int wait_end() {
        if (!wait_for([&] { return fs::exists(status) && fs::file_size(status) > 0; }, 150)) return -1;
        return std::stoi(read_bytes(status));
    }
};

TEST_CASE("a rank that dies ends the whole job with a message, and the last checkpoint stays intact",
          "[.][mpi][failure]") {
    require_mpi();
    TempDir tmp("handgrad-mpi");
    const std::string data = write_file(tmp.path / "data.txt", varied_text());
    BackgroundJob job(tmp.path, data);
    const fs::path out = job.out;
    INFO(read_bytes(job.log));
    REQUIRE(job.wait_saving());
    const pid_t victim = find_rank(out.string(), 1);
    REQUIRE(victim > 0);
    REQUIRE(kill(victim, SIGKILL) == 0);

    // mpirun notices and ends rank 0 too; the timeout (exit 124) would mean it hung.
    const int code = job.wait_end();
    const std::string output = read_bytes(job.log);
    INFO(output);
    REQUIRE(code != -1);
    CHECK(code != 0);
    CHECK(code != 124);
    // Open MPI names the rank and the signal.
    CHECK(output.find("rank 1") != std::string::npos);
    CHECK((output.find("signal 9") != std::string::npos || output.find("Killed") != std::string::npos));
    CHECK(find_rank(out.string(), 0) == 0);  // no rank is left behind

    // The last checkpoint is whole: it loads, and a 2-rank run resumes from it.
    const Checkpoint ck = Checkpoint::load((out / "ckpt.safetensors").string());
    CHECK(ck.progress.iter_num >= 2);
    CHECK(ck.progress.world_size == 2);
    const int next = ck.progress.iter_num + 2;
    Run resumed =
        run(mpirun(2) + bin("train") + kModel + " --data=" + data + " --eval_interval=2 --eval_iters=1 --batch_size=2" +
            " --init_from=resume --max_iters=" + std::to_string(next) + " --out_dir=" + out.string());
    INFO(resumed.output);
    CHECK(resumed.status == 0);
    CHECK(Checkpoint::load((out / "ckpt.safetensors").string()).progress.iter_num == next);
}

TEST_CASE("Ctrl-C on one rank stops every rank at the same step; rank 0 saves", "[.][mpi][failure]") {
    require_mpi();
    TempDir tmp("handgrad-mpi");
    const std::string data = write_file(tmp.path / "data.txt", varied_text());
    BackgroundJob job(tmp.path, data);
    INFO(read_bytes(job.log));
    REQUIRE(job.wait_saving());
    const pid_t rank1 = find_rank(job.out.string(), 1);
    REQUIRE(rank1 > 0);
    REQUIRE(kill(rank1, SIGINT) == 0);  // only rank 1 sees it: the ranks agree to stop together
    const int code = job.wait_end();
    const std::string output = read_bytes(job.log);
    INFO(output);
    CHECK(code == 0);
    CHECK(output.find("interrupted by a signal to another rank: saved checkpoint at iter") != std::string::npos);
    const Checkpoint ck = Checkpoint::load((job.out / "ckpt.safetensors").string());
    CHECK(output.find("saved checkpoint at iter " + std::to_string(ck.progress.iter_num)) != std::string::npos);
}

TEST_CASE("an error every rank hits ends the job with one error line", "[.][mpi][failure]") {
    require_mpi();
    TempDir tmp("handgrad-mpi");
    Run r = run(mpirun(2) + bin("train") + kModel + " --data=" + (tmp.path / "missing.txt").string());
    INFO(r.output);
    CHECK(r.status == 1);
    // Usually rank 0 alone says it (the others wait half a second before they would), but
    // which rank speaks first is up to the scheduler: only that the message is there is checked.
    CHECK(r.output.find(" of 2: cannot read data file") != std::string::npos);
}

TEST_CASE("a time budget on 2 ranks: one plan, one stop, every rank in step", "[.][mpi][budget]") {
    require_mpi();
    TempDir tmp("handgrad-mpi");
    const std::string data = write_file(tmp.path / "data.txt", varied_text());
    const std::string out = (tmp.path / "out").string();
    Run r = run(mpirun(2) + bin("train") + kModel + " --data=" + data +
                " --batch_size=2 --time_budget=2 --eval_interval=1000000 --out_dir=" + out);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.output.find("iterations planned") != std::string::npos);
    CHECK(r.output.find("whole val split: loss") != std::string::npos);
    // The ranks' weights were compared (ranks_agree) at the final evaluation, or the run failed.
    Checkpoint ck = Checkpoint::load(out + "/ckpt.safetensors");
    CHECK(ck.progress.iter_num > 0);
    CHECK(ck.progress.world_size == 2);
}

// libFuzzer harness for hg::fuzz::checkpoint_bytes (tests/fuzz/targets.h says what it checks).
#include "tests/fuzz/targets.h"

HG_FUZZ_TARGET(hg::fuzz::checkpoint_bytes(data, size))

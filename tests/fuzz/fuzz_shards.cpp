// libFuzzer harness for hg::fuzz::shard_bytes (tests/fuzz/targets.h says what it checks).
#include "tests/fuzz/targets.h"

HG_FUZZ_TARGET(hg::fuzz::shard_bytes(data, size))

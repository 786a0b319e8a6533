// libFuzzer harness for hg::fuzz::text_bytes (tests/fuzz/targets.h says what it checks).
#include "tests/fuzz/targets.h"

HG_FUZZ_TARGET(hg::fuzz::text_bytes(data, size))

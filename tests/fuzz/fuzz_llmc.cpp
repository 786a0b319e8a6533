// libFuzzer harness for hg::fuzz::llmc_model_bytes (tests/fuzz/targets.h says what it checks).
#include "tests/fuzz/targets.h"

HG_FUZZ_TARGET(hg::fuzz::llmc_model_bytes(data, size))

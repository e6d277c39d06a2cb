// Must not compile as part of layers/: optim/ sits above layers/ (ctest layering_upward_include).
#include "layers/module.h"
#include "optim/sgd.h"

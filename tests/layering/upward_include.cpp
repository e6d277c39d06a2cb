// Must not compile as part of layers/: optim/ sits above layers/ (ctest layering_upward_include).
#include <tapegrad/layers/module.h>
#include <tapegrad/optim/sgd.h>

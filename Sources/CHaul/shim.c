// Intentionally empty: CHaul's shims are `static inline` in include/CHaul.h. SwiftPM needs one
// source file to build the module.
#include "CHaul.h"

#include "xrt_device.h"

#pragma once
// The device whose kernel table this thread looked up last (kernel_table()):
// CMHA_KERNEL looks the table up right before the call it times, so the
// profile (profile.cpp) knows which device a timed kernel runs on without
// the entry's arguments. (An argument expression that itself runs a kernel of
// another device would mislabel the call; none does.)
#include "tensor/device.h"

namespace cmha::backend {

Device last_kernel_table_device();

}  // namespace cmha::backend

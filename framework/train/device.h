#pragma once
// The device a recipe trains on (train.device), checked once at start-up.
#include "tensor/device.h"
#include "train/recipe.h"

namespace cmha::train {

// Parses train.device and checks that this build and machine can run on it;
// every problem is one sentence naming train.device and its value.
Device recipe_device(const Recipe& recipe);

// The same for a device named elsewhere (a command's --device): every
// problem is one sentence starting with `what` (e.g. "--device cuda").
Device checked_device(const std::string& text, const std::string& what);

}  // namespace cmha::train

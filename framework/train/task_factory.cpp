#include "train/task_factory.h"

#include "tensor/error.h"
#include "train/image_task.h"
#include "train/translation_task.h"

namespace cmha::train {

namespace {

template <class T>
std::unique_ptr<Task> make(const run::Recipe& recipe, Generator& init_gen, int rank, int world) {
  return std::make_unique<T>(recipe, init_gen, rank, world);
}

}  // namespace

const std::vector<ModelKind>& model_kinds() {
  static const std::vector<ModelKind> kinds = {
      {"transformer", "translation", &make<TranslationTask>, &transformer_bench_model, &score_translation_checkpoint,
       "bleu"},
      {"vit", "image_classification", &make<ImageClassificationTask>, &vit_bench_model, &score_image_checkpoint, "top1"},
  };
  return kinds;
}

const ModelKind& model_kind(const std::string& name) {
  std::string known;
  for (const ModelKind& k : model_kinds()) {
    if (k.name == name) return k;
    known += (known.empty() ? "" : ", ") + std::string(k.name);
  }
  throw Error("model.kind '" + name + "' is not a model cmha builds (" + known + ")");
}

std::unique_ptr<Task> make_task(const run::Recipe& recipe, Generator& init_gen, int rank, int world) {
  const std::string task = recipe.string("train.task");
  const ModelKind& kind = model_kind(recipe.string("model.kind"));
  CMHA_CHECK(task == kind.task, "train.task " + task + " does not train model.kind " + kind.name + " (model.kind " +
                                    kind.name + " is trained by train.task " + kind.task + ")");
  return kind.make_task(recipe, init_gen, rank, world);
}

}  // namespace cmha::train

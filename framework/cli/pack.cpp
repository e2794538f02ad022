// cmha pack: an ImageFolder split written as WebDataset-style tar shards (data/pack_shards.h).
#include <omp.h>

#include <cstdio>

#include "cli/command_line.h"
#include "data/pack_shards.h"
#include "tensor/error.h"

namespace cmha::cli {

int pack_command(const Args& args) {
  std::string src, out;
  long long shard_samples = 1000, max_side = 0, quality = 90, seed = 1, threads = 0;
  bool skip_bad = false;
  CommandLine cl("pack",
                 "Packs an ImageFolder split (SRC/<class>/<image>, as ImageNet's train/ and val/) into tar shards\n"
                 "that `data.format: shards` reads: OUT/shard-NNNNNN.tar (NNNNNN.jpg + NNNNNN.cls members),\n"
                 "OUT/shard-NNNNNN.idx and OUT/shards.json. The samples are shuffled once before sharding.\n"
                 "  cmha pack data/imagenet/train data/imagenet-shards/train --max-side 320");
  cl.app().add_option("src", src, "the ImageFolder split to pack")->required()->type_name("SRC");
  cl.app().add_option("out", out, "the folder of shards to write (empty or new)")->required()->type_name("OUT");
  cl.app().add_option("--shard-samples", shard_samples, "samples per shard")
      ->check(whole_number(1, 1 << 24))->capture_default_str();
  cl.app().add_option("--max-side", max_side,
                      "re-encode (JPEG) images whose shorter side is longer, resized to this; 0 = keep every file's bytes")
      ->check(whole_number(0, 1 << 16))->capture_default_str();
  cl.app().add_option("--quality", quality, "JPEG quality of re-encoded images")
      ->check(whole_number(1, 100))->capture_default_str();
  cl.app().add_option("--seed", seed, "the shuffle before sharding")->check(whole_number(0, 1LL << 62))->capture_default_str();
  cl.app().add_option("--threads", threads, "decoding threads with --max-side; 0 = all cores")
      ->check(whole_number(0, 1024))->capture_default_str();
  cl.app().add_flag("--skip-bad", skip_bad, "with --max-side: leave out images that do not decode (counted)");
  if (!cl.parse(args)) return 0;
  if (threads > 0) omp_set_num_threads(static_cast<int>(threads));
  data::PackOptions o;
  o.shard_samples = shard_samples;
  o.max_side = max_side;
  o.quality = static_cast<int>(quality);
  o.seed = static_cast<uint64_t>(seed);
  o.skip_bad = skip_bad;
  const data::PackResult r = data::pack_image_folder(src, out, o, [](const data::PackResult& p) {
    std::fprintf(stderr, "\rpack: %zu shards, %lld samples, %.1f GB", p.set.shards.size(),
                 static_cast<long long>(p.set.samples), static_cast<double>(p.bytes) / 1e9);
  });
  std::fprintf(stderr, "\n");
  std::printf("packed %lld samples of %zu classes into %zu shards in %s (%.2f GB; %lld re-encoded, %lld left out)\n",
              static_cast<long long>(r.set.samples), r.set.classes.size(), r.set.shards.size(), out.c_str(),
              static_cast<double>(r.bytes) / 1e9, static_cast<long long>(r.reencoded),
              static_cast<long long>(r.skipped));
  return 0;
}

}  // namespace cmha::cli

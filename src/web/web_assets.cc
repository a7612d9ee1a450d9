#include "web/web_assets.h"

namespace runloom::web {

const Asset* FindAsset(std::string_view path) {
  if (path == "/" || path == "/ui" || path == "/ui/") path = "/ui/index.html";
  for (size_t i = 0; i < kAssetCount; ++i) {
    if (kAssets[i].path == path) return &kAssets[i];
  }
  return nullptr;
}

}  // namespace runloom::web

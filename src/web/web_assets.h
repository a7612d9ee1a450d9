// The web UI's files (web/), embedded in the binary at build time so
// `runloom serve` needs nothing on disk. cmake/EmbedFiles.cmake generates the
// table from web/*; web_assets_test checks it against the files.
//
// Thread-safety: immutable data.
#pragma once

#include <cstddef>
#include <string_view>

namespace runloom::web {

struct Asset {
  std::string_view path;          // "/ui/app.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view body;
};

extern const Asset kAssets[];
extern const size_t kAssetCount;

// The asset served at `path`, or nullptr. "/" and "/ui/" are the UI's
// index.html (the UI routes inside the page, after '#').
const Asset* FindAsset(std::string_view path);

}  // namespace runloom::web

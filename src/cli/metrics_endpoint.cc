// ServeMetrics (commands.h): `runloom worker --metrics-listen ADDR`.
#include "cli/cli_common.h"
#include "cli/commands.h"

#include "absl/strings/str_cat.h"

#include "prometheus/exposer.h"
#include "prometheus/registry.h"

#include <arpa/inet.h>

#include <exception>

namespace runloom::cli {

absl::StatusOr<std::unique_ptr<prometheus::Exposer>> ServeMetrics(
    const std::string& address, const std::shared_ptr<prometheus::Registry>& registry) {
  const std::string form = "; use HOST:PORT with an IPv4 address, e.g. 127.0.0.1:9464";
  // civetweb listens on IPv4 HOST:PORT only: the host must be an address.
  std::optional<HostPort> hp = ParseHostPort(address);
  in_addr ip{};
  if (!hp.has_value() || inet_pton(AF_INET, hp->host.c_str(), &ip) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen: '", address, "' is not an address", form));
  }
  // prometheus-cpp's Exposer (civetweb) throws when it cannot listen.
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/1);
    exposer->RegisterCollectable(registry);
    return exposer;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen: cannot listen on ", address, ": ", e.what()));
  }
}

}  // namespace runloom::cli

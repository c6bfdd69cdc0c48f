// The `bashexec` program's egress proxy (executors.hpp: make_egress_gateway),
// compiled apart from main.cpp: Asio and Beast stay out of the largest unit.

#include <memory>

#include <bashexec/egress.hpp>
#include <bashexec/network/egress_proxy.hpp>

namespace bashexec::cli {

std::shared_ptr<egress_gateway> make_egress_gateway() { return std::make_shared<network::asio_egress_gateway>(); }

}  // namespace bashexec::cli

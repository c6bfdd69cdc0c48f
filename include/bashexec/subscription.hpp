// subscription: the RAII handle `on_task_done` returns; destroying it (or
// calling `reset`) unsubscribes. It may outlive the executor harmlessly.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

namespace bashexec {

class subscription {
 public:
  subscription() = default;
  explicit subscription(std::function<void()> unsubscribe) : unsubscribe_(std::move(unsubscribe)) {}
  subscription(subscription&& other) noexcept : unsubscribe_(std::exchange(other.unsubscribe_, {})) {}
  subscription& operator=(subscription&& other) noexcept {
    if (this != &other) {
      reset();
      unsubscribe_ = std::exchange(other.unsubscribe_, {});
    }
    return *this;
  }
  subscription(const subscription&) = delete;
  subscription& operator=(const subscription&) = delete;
  ~subscription() { reset(); }

  void reset() {
    if (auto fn = std::exchange(unsubscribe_, {})) fn();
  }
  explicit operator bool() const noexcept { return static_cast<bool>(unsubscribe_); }

 private:
  std::function<void()> unsubscribe_;
};

}  // namespace bashexec

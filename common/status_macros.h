// status_macros.h: early-return helpers for absl::Status / absl::StatusOr.
//
// Debian 12's Abseil (20220623) predates absl/status/status_macros.h, so the
// project defines its own two macros here, once.
//
//   KC_RETURN_IF_ERROR(WriteHeader(fd));
//   KC_ASSIGN_OR_RETURN(auto pack, PackReader::Open(path));
#ifndef KERNCAP_COMMON_STATUS_MACROS_H_
#define KERNCAP_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define KC_STATUS_CONCAT_INNER_(a, b) a##b
#define KC_STATUS_CONCAT_(a, b) KC_STATUS_CONCAT_INNER_(a, b)

#define KC_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    ::absl::Status kc_status_ = (expr);          \
    if (!kc_status_.ok()) return kc_status_;     \
  } while (false)

#define KC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).status();  \
  lhs = std::move(tmp).value()

#define KC_ASSIGN_OR_RETURN(lhs, expr) \
  KC_ASSIGN_OR_RETURN_IMPL_(KC_STATUS_CONCAT_(kc_statusor_, __LINE__), lhs, expr)

#endif  // KERNCAP_COMMON_STATUS_MACROS_H_

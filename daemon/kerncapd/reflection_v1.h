// reflection_v1.h: gRPC server reflection, version v1 (the stable one), from
// the descriptors compiled into kerncapd. gRPC 1.51's plugin serves only
// v1alpha; tools such as grpcurl try v1 first. Both are served.
#ifndef KERNCAP_DAEMON_KERNCAPD_REFLECTION_V1_H_
#define KERNCAP_DAEMON_KERNCAPD_REFLECTION_V1_H_

#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace kerncap::kerncapd {

class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::Service {
 public:
  // `services`: the fully qualified names list_services answers with.
  explicit ReflectionV1Service(std::vector<std::string> services)
      : services_(std::move(services)) {}

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<grpc::reflection::v1::ServerReflectionResponse,
                               grpc::reflection::v1::ServerReflectionRequest>* stream) override;

 private:
  std::vector<std::string> services_;
};

}  // namespace kerncap::kerncapd

#endif  // KERNCAP_DAEMON_KERNCAPD_REFLECTION_V1_H_

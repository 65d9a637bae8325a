#include "daemon/kerncapd/reflection_v1.h"

#include <set>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"

namespace kerncap::kerncapd {
namespace {

namespace rv1 = grpc::reflection::v1;
using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;

void Error(rv1::ServerReflectionResponse* resp, grpc::StatusCode code, const std::string& what) {
  resp->mutable_error_response()->set_error_code(static_cast<int32_t>(code));
  resp->mutable_error_response()->set_error_message(what);
}

// `file` and, depth first, the files it imports, skipping those `sent`
// already holds (a client that asks for several symbols of one file gets its
// dependencies once per stream, as the protocol allows).
void AddFile(const FileDescriptor* file, std::set<std::string>* sent,
             rv1::FileDescriptorResponse* out) {
  if (!sent->insert(file->name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out->add_file_descriptor_proto(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) AddFile(file->dependency(i), sent, out);
}

}  // namespace

grpc::Status ReflectionV1Service::ServerReflectionInfo(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<rv1::ServerReflectionResponse, rv1::ServerReflectionRequest>*
        stream) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  std::set<std::string> sent;
  rv1::ServerReflectionRequest req;
  while (stream->Read(&req)) {
    if (context->IsCancelled()) return grpc::Status::CANCELLED;
    rv1::ServerReflectionResponse resp;
    resp.set_valid_host(req.host());
    *resp.mutable_original_request() = req;
    const FileDescriptor* file = nullptr;
    switch (req.message_request_case()) {
      case rv1::ServerReflectionRequest::kListServices:
        for (const std::string& s : services_) {
          resp.mutable_list_services_response()->add_service()->set_name(s);
        }
        break;
      case rv1::ServerReflectionRequest::kFileByFilename:
        file = pool->FindFileByName(req.file_by_filename());
        if (file == nullptr) Error(&resp, grpc::StatusCode::NOT_FOUND, "file not found");
        break;
      case rv1::ServerReflectionRequest::kFileContainingSymbol:
        file = pool->FindFileContainingSymbol(req.file_containing_symbol());
        if (file == nullptr) Error(&resp, grpc::StatusCode::NOT_FOUND, "symbol not found");
        break;
      case rv1::ServerReflectionRequest::kFileContainingExtension: {
        const auto* type =
            pool->FindMessageTypeByName(req.file_containing_extension().containing_type());
        const auto* ext =
            type == nullptr
                ? nullptr
                : pool->FindExtensionByNumber(type,
                                              req.file_containing_extension().extension_number());
        if (ext == nullptr) {
          Error(&resp, grpc::StatusCode::NOT_FOUND, "extension not found");
        } else {
          file = ext->file();
        }
        break;
      }
      case rv1::ServerReflectionRequest::kAllExtensionNumbersOfType: {
        const auto* type = pool->FindMessageTypeByName(req.all_extension_numbers_of_type());
        if (type == nullptr) {
          Error(&resp, grpc::StatusCode::NOT_FOUND, "type not found");
          break;
        }
        std::vector<const google::protobuf::FieldDescriptor*> exts;
        pool->FindAllExtensions(type, &exts);
        auto* numbers = resp.mutable_all_extension_numbers_response();
        numbers->set_base_type_name(type->full_name());
        for (const auto* e : exts) numbers->add_extension_number(e->number());
        break;
      }
      default:
        Error(&resp, grpc::StatusCode::UNIMPLEMENTED, "unknown request");
    }
    if (file != nullptr) AddFile(file, &sent, resp.mutable_file_descriptor_response());
    if (!stream->Write(resp)) break;
  }
  return grpc::Status::OK;
}

}  // namespace kerncap::kerncapd

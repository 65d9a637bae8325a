#include "common/control/api_json.h"

#include <string>

#include "common/control/api_names.h"
#include "common/json_policy.h"

namespace kerncap::api {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

nlohmann::json EnumJson(const FieldDescriptor* f, int value) {
  absl::string_view name = EnumName(f->enum_type(), value);
  // A value this build does not know (a newer peer): its number, so nothing
  // is invented.
  if (name.empty()) return value;
  return std::string(name);
}

nlohmann::json Scalar(const Message& m, const Reflection* r, const FieldDescriptor* f) {
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64: return r->GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32: return r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64:
      if (IsAddressField(f)) return json_policy::Address(r->GetUInt64(m, f));
      return r->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE: return json_policy::Number(r->GetDouble(m, f));
    case FieldDescriptor::CPPTYPE_FLOAT: return json_policy::Number(r->GetFloat(m, f));
    case FieldDescriptor::CPPTYPE_BOOL: return r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM: return EnumJson(f, r->GetEnumValue(m, f));
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string s = r->GetString(m, f);
      if (f->type() == FieldDescriptor::TYPE_BYTES) return json_policy::HexBytes(s);
      return s;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: return ToJson(r->GetMessage(m, f));
  }
  return nullptr;
}

nlohmann::json RepeatedElement(const Message& m, const Reflection* r, const FieldDescriptor* f,
                               int i) {
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return r->GetRepeatedInt32(m, f, i);
    case FieldDescriptor::CPPTYPE_INT64: return r->GetRepeatedInt64(m, f, i);
    case FieldDescriptor::CPPTYPE_UINT32: return r->GetRepeatedUInt32(m, f, i);
    case FieldDescriptor::CPPTYPE_UINT64:
      if (IsAddressField(f)) return json_policy::Address(r->GetRepeatedUInt64(m, f, i));
      return r->GetRepeatedUInt64(m, f, i);
    case FieldDescriptor::CPPTYPE_DOUBLE: return json_policy::Number(r->GetRepeatedDouble(m, f, i));
    case FieldDescriptor::CPPTYPE_FLOAT: return json_policy::Number(r->GetRepeatedFloat(m, f, i));
    case FieldDescriptor::CPPTYPE_BOOL: return r->GetRepeatedBool(m, f, i);
    case FieldDescriptor::CPPTYPE_ENUM: return EnumJson(f, r->GetRepeatedEnumValue(m, f, i));
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string s = r->GetRepeatedString(m, f, i);
      if (f->type() == FieldDescriptor::TYPE_BYTES) return json_policy::HexBytes(s);
      return s;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: return ToJson(r->GetRepeatedMessage(m, f, i));
  }
  return nullptr;
}

// A map key as a JSON object key (keys are strings or integers in proto).
std::string MapKey(const Message& entry, const FieldDescriptor* key) {
  const Reflection* r = entry.GetReflection();
  switch (key->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING: return r->GetString(entry, key);
    case FieldDescriptor::CPPTYPE_INT32: return std::to_string(r->GetInt32(entry, key));
    case FieldDescriptor::CPPTYPE_INT64: return std::to_string(r->GetInt64(entry, key));
    case FieldDescriptor::CPPTYPE_UINT32: return std::to_string(r->GetUInt32(entry, key));
    case FieldDescriptor::CPPTYPE_UINT64: return std::to_string(r->GetUInt64(entry, key));
    case FieldDescriptor::CPPTYPE_BOOL: return r->GetBool(entry, key) ? "true" : "false";
    default: return "";
  }
}

}  // namespace

nlohmann::json ToJson(const Message& m) {
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  const Reflection* r = m.GetReflection();
  nlohmann::json out = nlohmann::json::object();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_map()) {
      nlohmann::json obj = nlohmann::json::object();
      const FieldDescriptor* key = f->message_type()->map_key();
      const FieldDescriptor* value = f->message_type()->map_value();
      for (int k = 0; k < r->FieldSize(m, f); ++k) {
        const Message& entry = r->GetRepeatedMessage(m, f, k);
        obj[MapKey(entry, key)] = Scalar(entry, entry.GetReflection(), value);
      }
      out[f->name()] = std::move(obj);
    } else if (f->is_repeated()) {
      nlohmann::json arr = nlohmann::json::array();
      for (int k = 0; k < r->FieldSize(m, f); ++k) arr.push_back(RepeatedElement(m, r, f, k));
      out[f->name()] = std::move(arr);
    } else if (f->containing_oneof() != nullptr || f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (r->HasField(m, f)) out[f->name()] = Scalar(m, r, f);
    } else {
      out[f->name()] = Scalar(m, r, f);
    }
  }
  return out;
}

}  // namespace kerncap::api

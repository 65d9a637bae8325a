# Holds kerncap_v1.binpb, the FileDescriptorSet of proto/kerncap/v1/*.proto,
# written by the build (setup.py) and never committed: kerncap._pb builds the
# message classes from it against whatever protobuf runtime is installed.

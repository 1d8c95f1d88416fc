// Importing a big .onnx file without copying its weights through protobuf. Internal to kiln_onnx.
//
// A parsed ModelProto holds every initializer's raw_data in a string of its own: for a 440 MB
// BERT-base file that is 440 MB more memory and a copy (most of a compile's time where page faults
// are dear) before kiln copies the bytes once more into its own tensors. Instead, the file's
// protobuf wire data is rewritten before parsing: each top-level initializer's raw_data of more
// than a threshold becomes an ONNX external-data reference to the very same bytes in the model
// file (location: the file's own name, offset, length), which the importer's external-data reader
// then reads once, straight into the tensor. Only the graph's structure is parsed.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>

namespace kiln::onnx_import {

// `file` is a serialized ModelProto, read from `file_name` in the model directory. Returns it
// with every graph initializer (ModelProto.graph.initializer, not those of subgraphs) whose
// raw_data holds more than `min_bytes` bytes rewritten as described above, or nullopt when there
// is none to rewrite or the bytes are not wire data the rewrite understands (malformed, groups,
// an initializer that already has external data or repeats raw_data): the caller then parses
// `file` itself, which reports any error.
std::optional<std::string> refer_to_weights_in_place(std::span<const std::byte> file,
                                                     const std::string& file_name,
                                                     size_t min_bytes);

}  // namespace kiln::onnx_import

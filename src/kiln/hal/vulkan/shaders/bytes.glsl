// 1-byte elements (bool, u8): needs the device's storageBuffer8BitAccess (the kernels using this
// refuse without it). Stores of single bytes by different invocations to one 32-bit word are
// independent under 8-bit storage.
#extension GL_EXT_shader_8bit_storage : require

layout(buffer_reference, std430, buffer_reference_align = 1) buffer U8 { uint8_t v[]; };

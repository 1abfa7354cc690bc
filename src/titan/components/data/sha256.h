// SHA-256 (FIPS 180-4) of byte strings, through OpenSSL's libcrypto: the dataset files' hashes
// in the run manifest and the token-cache names.
#pragma once

#include <string>
#include <string_view>

namespace titan::components::data {

/// Lower-case hex SHA-256 digest (64 characters) of `bytes`.
std::string sha256_hex(std::string_view bytes);

}  // namespace titan::components::data



namespace ductile::core {


}  // namespace ductile::core

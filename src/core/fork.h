
namespace ductile::core {

void prefork() noexcept;
void postfork_parent() noexcept;
void postfork_child() noexcept;

}  // namespace ductile::core

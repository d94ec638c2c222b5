"""vulkan."""

"""vkfft."""

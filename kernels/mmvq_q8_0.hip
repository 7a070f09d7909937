/* iq_mmvq kernels for q8_0 (see mmvq_impl.h). */
#include "mmvq_impl.h"
template st_rt_error st_launch_mmvq<T_Q8_0>(const st_launch &, const st_mat_dev &, const st_xplanes &, const uint8_t *,
                                       int, float *, int, bool, bool);

/* iq_mmvq kernels for q4_k (see mmvq_impl.h). */
#include "mmvq_impl.h"
template st_rt_error st_launch_mmvq<T_Q4_K>(const st_launch &, const st_mat_dev &, const st_xplanes &, const uint8_t *,
                                       int, float *, int, bool, bool);

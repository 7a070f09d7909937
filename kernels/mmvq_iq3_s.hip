/* iq_mmvq kernels for iq3_s (see mmvq_impl.h). */
#include "mmvq_impl.h"
template st_rt_error st_launch_mmvq<T_IQ3_S>(const st_launch &, const st_mat_dev &, const st_xplanes &, const uint8_t *,
                                       int, float *, int, bool, bool);

/* expert_grouped kernels with iq2_s weights (see expert_impl.h). */
#include "expert_impl.h"
template st_rt_error st_launch_gate_up<T_IQ2_S>(const st_launch &, const st_expert_args &, const st_expert_plan &);
template st_rt_error st_launch_down<T_IQ2_S>(const st_launch &, const st_expert_args &, const st_expert_plan &);

# kpipe run counts the bytes each rank sends per link and prints them next to
# what kpipe plan predicts (issue 13): on the tensor-parallel example (p = 2,
# t = 2), with scatter/gather on and off, every rank's measured bytes per step
# equal the plan's for its stage (the validation passes of train.eval_every
# counted apart), and a boundary carries 1/t of the tensor with
# scatter/gather, all of it without.
#   cmake -DKPIPE=<kpipe> -DLOCAL_SH=<examples/jobs/local.sh> -DWORK_DIR=<dir> -P link_volume.cmake
#   (from the repository root)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(deck inputs/tensor_parallel.toml)
set(t 2)

foreach(scatter_gather true false)
  set(keys pipeline.scatter_gather=${scatter_gather} train.steps=2 train.eval_every=1)
  execute_process(COMMAND ${KPIPE} plan ${deck} ${keys} --no-ascii --json ${WORK_DIR}/plan.json
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "kpipe plan failed (${code}): ${out}${err}")
  endif()
  execute_process(COMMAND ${LOCAL_SH} run ${deck} ${keys} --json ${WORK_DIR}/run.json
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "kpipe run failed (${code}): ${out}${err}")
  endif()
  file(READ ${WORK_DIR}/plan.json plan)
  file(READ ${WORK_DIR}/run.json run)

  # One boundary: its whole tensor is b x T x dim floats, a rank sends 1/t of it, or all.
  string(JSON whole GET "${plan}" communication boundary_bytes 0)
  if(NOT whole EQUAL 32768)
    message(FATAL_ERROR "the boundary tensor is 4 x 32 x 64 x 4 = 32768 bytes, but plan says ${whole}")
  endif()
  math(EXPR share "${whole} / ${t}")
  if(scatter_gather STREQUAL "false")
    set(share ${whole})
  endif()
  string(JSON m GET "${run}" m)

  string(JSON ranks LENGTH "${run}" ranks)
  math(EXPR last "${ranks} - 1")
  foreach(r RANGE ${last})
    string(JSON stage GET "${run}" ranks ${r} stage)
    foreach(link pipeline tensor data)
      string(JSON measured GET "${run}" ranks ${r} bytes_per_step ${link} measured)
      string(REGEX REPLACE "\\.0$" "" measured "${measured}")  # a mean over the steps, whole here
      string(JSON predicted GET "${plan}" communication ranks ${stage} ${link} bytes)
      if(NOT measured EQUAL predicted)
        message(FATAL_ERROR "scatter_gather = ${scatter_gather}, world rank ${r} (stage ${stage}): ${measured} "
                            "${link} bytes per step measured, ${predicted} predicted by kpipe plan")
      endif()
    endforeach()
    # Stage 0 sends one activation per microbatch; stage 1 one gradient.
    string(JSON measured GET "${run}" ranks ${r} bytes_per_step pipeline measured)
    string(REGEX REPLACE "\\.0$" "" measured "${measured}")
    math(EXPR per_microbatch "${measured} / ${m}")
    if(NOT per_microbatch EQUAL share)
      message(FATAL_ERROR "scatter_gather = ${scatter_gather}, world rank ${r}: ${per_microbatch} bytes per "
                          "boundary and microbatch, not ${share}")
    endif()
  endforeach()
endforeach()

# ctest's test_consumer: installs the build tree's C++ package into WORK/prefix (cmake --install,
# component development), configures and builds tests/consumer against it (CMAKE_PREFIX_PATH only,
# no path into the source or build tree), and runs the consumer.
# cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK=... -DGENERATOR=... -P run.cmake
foreach(var BUILD_DIR SOURCE_DIR WORK GENERATOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run.cmake: -D${var}=... is missing")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK})

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    list(JOIN ARGN " " command)
    message(FATAL_ERROR "test_consumer: `${command}` failed (${status})")
  endif()
endfunction()

step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix --component development)
step(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release
     -DCMAKE_PREFIX_PATH=${WORK}/prefix)
step(${CMAKE_COMMAND} --build ${WORK}/build)
step(${WORK}/build/consumer)
